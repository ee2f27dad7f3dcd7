"""OpenTofu's documented client algorithm (tests/oci/tofu_client.py) installs a
module and a provider from a running gitreg, and each provider layer digest is
the `zh:` hash the real Terraform CLI writes to its lock file for the same
provider through gitreg's registry protocol."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.oci.conftest import PLATFORMS, make_token, publish_module, publish_provider
from tests.oci.tofu_client import InstallError, OciClient
from tests.support.gitrepo import GitRepo
from tests.support.provider_dist import make_services
from tests.support.server import RunningServer, start_server
from tests.support.terraform import run_terraform

pytestmark = pytest.mark.slow


@dataclass
class Registry:
    server: RunningServer
    token: str
    module_tree: dict[str, bytes]


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    root = tmp_path_factory.mktemp("oci-tofu")
    svc = make_services(root / "data")
    for namespace in ("open", "secret"):
        publish_module(svc, GitRepo(root / namespace), namespace, ("v1.0.0", "v1.2.0+build.7"))
        publish_provider(svc, root, namespace, "2.0.0")
        publish_provider(svc, root, namespace, "2.1.0")
    svc.auth.set_namespace_private("secret", True)
    token = make_token(svc, "read", ["secret"])
    module = svc.index.find_module("open", "vpc", "aws")
    assert module is not None
    version = svc.index.version_by_key(module.id, "1.0.0")
    assert version is not None
    with svc.blobs.open(version.archive_sha256) as raw, tarfile.open(fileobj=raw) as tar:
        tree = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    svc.close()
    server = start_server(root / "data", env={"GITREG_OCI_MODULE_DOWNLOADS": "true"})
    yield Registry(server, token, tree)
    server.stop()


def _client(registry: Registry, namespace: str) -> OciClient:
    password = registry.token if namespace == "secret" else ""
    return OciClient(registry.server.host, str(registry.server.ca_pem), "tofu", password)


def _tree(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


@pytest.mark.parametrize("namespace", ["open", "secret"])
def test_module_installs_by_tag_and_by_digest(
    registry: Registry, namespace: str, tmp_path: Path
) -> None:
    client = _client(registry, namespace)
    host = registry.server.host
    by_tag = client.install_module(
        f"oci://{host}/modules/{namespace}/vpc/aws?tag=1.0.0", tmp_path / "tag"
    )
    manifest = client.resolve(f"modules/{namespace}/vpc/aws", "1.0.0")
    by_digest = client.install_module(
        f"oci://{host}/modules/{namespace}/vpc/aws?digest={manifest.digest}", tmp_path / "digest"
    )
    assert by_tag == by_digest
    if namespace == "open":
        assert _tree(tmp_path / "tag") == registry.module_tree
    assert _tree(tmp_path / "tag") == _tree(tmp_path / "digest")
    client.close()


def test_build_metadata_is_an_underscore_in_the_tag(registry: Registry, tmp_path: Path) -> None:
    client = _client(registry, "open")
    host = registry.server.host
    client.install_module(f"oci://{host}/modules/open/vpc/aws?tag=1.2.0_build.7", tmp_path)
    assert "1.2.0_build.7" in client.tags("modules/open/vpc/aws")
    client.close()


def test_module_without_tag_looks_for_latest(registry: Registry, tmp_path: Path) -> None:
    client = _client(registry, "open")
    with pytest.raises(InstallError, match="resolving latest: 404"):
        client.install_module(f"oci://{registry.server.host}/modules/open/vpc/aws", tmp_path)
    client.close()


def test_a_private_module_without_credentials_fails(registry: Registry, tmp_path: Path) -> None:
    client = _client(registry, "open")
    with pytest.raises(InstallError, match="401"):
        client.install_module(
            f"oci://{registry.server.host}/modules/secret/vpc/aws?tag=1.0.0", tmp_path
        )
    client.close()


@pytest.mark.parametrize("namespace", ["open", "secret"])
def test_provider_installs_every_platform(registry: Registry, namespace: str) -> None:
    client = _client(registry, namespace)
    repository = f"providers/{namespace}/null"
    assert client.available_versions(repository) == ["2.0.0", "2.1.0"]
    for platform in PLATFORMS:
        os, arch = platform.split("_")
        meta = client.package_meta(repository, "2.1.0", os, arch)
        data = client.install_provider(repository, meta)
        assert meta.zh == "zh:" + hashlib.sha256(data).hexdigest()
    with pytest.raises(InstallError, match="0 manifests for freebsd_arm"):
        client.package_meta(repository, "2.1.0", "freebsd", "arm")
    client.close()


def test_tags_are_read_page_by_page(registry: Registry) -> None:
    client = _client(registry, "open")
    assert client.tags("providers/open/null") == ["2.0.0", "2.1.0"]
    answer = client.request("GET", "/v2/providers/open/null/tags/list?n=1")
    assert answer.json()["tags"] == ["2.0.0"]
    assert (
        answer.headers["link"] == '</v2/providers/open/null/tags/list?n=1&last=2.0.0>; rel="next"'
    )
    client.close()


def test_an_unknown_provider_is_not_found(registry: Registry) -> None:
    client = _client(registry, "open")
    with pytest.raises(InstallError, match="provider not found"):
        client.available_versions("providers/open/nothing")
    client.close()


def _terraforms() -> list[Path | None]:
    """The pinned Terraform 1.0.3 (None), and the newer one on PATH when there is one."""
    on_path = shutil.which("terraform")
    return [None, *([Path(on_path)] if on_path else [])]


@pytest.mark.parametrize(
    "binary", _terraforms(), ids=lambda b: "pinned" if b is None else "on-path"
)
def test_layer_digests_are_the_zh_hashes_terraform_locks(
    registry: Registry, tmp_path: Path, binary: Path | None
) -> None:
    server = registry.server
    (tmp_path / "main.tf").write_text(
        "terraform {\n  required_providers {\n"
        f'    null = {{\n      source  = "{server.host}/open/null"\n'
        '      version = "2.1.0"\n    }\n  }\n}\n'
    )
    platforms = [f"-platform={p}" for p in PLATFORMS]
    run_terraform(tmp_path, "providers", "lock", *platforms, ca_pem=server.ca_pem, binary=binary)
    lock_file = (tmp_path / ".terraform.lock.hcl").read_text()
    client = _client(registry, "open")
    for platform in PLATFORMS:
        os, arch = platform.split("_")
        meta = client.package_meta("providers/open/null", "2.1.0", os, arch)
        assert f'"{meta.zh}"' in lock_file
    client.close()


def test_a_registry_download_installs_through_oci(registry: Registry, tmp_path: Path) -> None:
    """The registry protocol resolves a version; OpenTofu 1.10 is sent to
    `/v2/` pinned by digest and installs the same tree from there."""
    client = _client(registry, "open")
    answer = client.http.get(
        f"{client.base}/v1/modules/open/vpc/aws/1.0.0/download",
        headers={"Accept": "application/json", "User-Agent": "OpenTofu/1.10.6"},
    )
    source = answer.json()["location"]
    assert source.startswith(f"oci://{registry.server.host}/modules/open/vpc/aws?digest=sha256:")
    client.install_module(source, tmp_path)
    assert _tree(tmp_path) == registry.module_tree
    client.close()

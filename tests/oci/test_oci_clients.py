"""Two independent OCI clients pull from a running gitreg: Debian's `skopeo`
(containers/image, Go) and the PyPI `oras` client (Python), anonymously for a
public namespace and with a gitreg token for a private one."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oras.client
import pytest

from tests.oci.conftest import PLATFORMS, make_token, publish_module, publish_provider
from tests.support.gitrepo import GitRepo
from tests.support.provider_dist import make_services
from tests.support.server import RunningServer, start_server

pytestmark = pytest.mark.slow


@dataclass
class Registry:
    server: RunningServer
    token: str  # a read token for the private namespace `secret`
    certs: Path  # a directory skopeo reads the server's CA from
    policy: Path


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    root = tmp_path_factory.mktemp("oci-clients")
    svc = make_services(root / "data")
    for namespace in ("open", "secret"):
        publish_module(svc, GitRepo(root / namespace), namespace, ("v1.0.0",))
        publish_provider(svc, root, namespace, "2.0.0")
    svc.auth.set_namespace_private("secret", True)
    token = make_token(svc, "read", ["secret"])
    svc.close()
    server = start_server(root / "data")
    certs = root / "certs"
    certs.mkdir()
    shutil.copy(server.ca_pem, certs / "ca.crt")
    policy = root / "policy.json"
    policy.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}]}))
    yield Registry(server, token, certs, policy)
    server.stop()


def _skopeo(*args: str) -> subprocess.CompletedProcess[str]:
    skopeo = shutil.which("skopeo")
    assert skopeo, "skopeo is not installed (apt-get install skopeo; .ci/run does)"
    return subprocess.run([skopeo, *args], capture_output=True, text=True, timeout=120)


def _layout_blob(layout: Path, digest: str) -> bytes:
    return (layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes()


def _layout_manifest(layout: Path) -> dict[str, Any]:
    index = json.loads((layout / "index.json").read_text())
    [entry] = index["manifests"]
    document: dict[str, Any] = json.loads(_layout_blob(layout, entry["digest"]))
    return document


@pytest.mark.parametrize("namespace", ["open", "secret"])
def test_skopeo_inspects_a_module_manifest(registry: Registry, namespace: str) -> None:
    creds = ["--creds", f"user:{registry.token}"] if namespace == "secret" else []
    ref = f"docker://{registry.server.host}/modules/{namespace}/vpc/aws:1.0.0"
    result = _skopeo("inspect", "--raw", "--cert-dir", str(registry.certs), *creds, ref)
    assert result.returncode == 0, result.stderr
    manifest = json.loads(result.stdout)
    assert manifest["artifactType"] == "application/vnd.opentofu.modulepkg"
    assert [layer["mediaType"] for layer in manifest["layers"]] == ["archive/zip"]


def test_skopeo_without_credentials_is_refused_a_private_module(registry: Registry) -> None:
    ref = f"docker://{registry.server.host}/modules/secret/vpc/aws:1.0.0"
    result = _skopeo("inspect", "--raw", "--cert-dir", str(registry.certs), ref)
    assert result.returncode != 0
    assert "unauthorized" in result.stderr.lower()


@pytest.mark.parametrize("namespace", ["open", "secret"])
def test_skopeo_copies_a_module_to_an_oci_layout(
    registry: Registry, namespace: str, tmp_path: Path
) -> None:
    creds = ["--src-creds", f"user:{registry.token}"] if namespace == "secret" else []
    layout = tmp_path / "layout"
    result = _skopeo(
        "--policy",
        str(registry.policy),
        "copy",
        "--src-cert-dir",
        str(registry.certs),
        *creds,
        f"docker://{registry.server.host}/modules/{namespace}/vpc/aws:1.0.0",
        f"oci:{layout}:1.0.0",
    )
    assert result.returncode == 0, result.stderr
    manifest = _layout_manifest(layout)
    [layer] = manifest["layers"]
    data = _layout_blob(layout, layer["digest"])
    assert "sha256:" + hashlib.sha256(data).hexdigest() == layer["digest"]
    (tmp_path / "module.zip").write_bytes(data)
    with zipfile.ZipFile(tmp_path / "module.zip") as zipped:
        assert "main.tf" in zipped.namelist()


@pytest.mark.parametrize("namespace", ["open", "secret"])
def test_skopeo_copies_every_platform_of_a_provider(
    registry: Registry, namespace: str, tmp_path: Path
) -> None:
    creds = ["--src-creds", f"user:{registry.token}"] if namespace == "secret" else []
    layout = tmp_path / "layout"
    result = _skopeo(
        "--policy",
        str(registry.policy),
        "copy",
        "--all",
        "--src-cert-dir",
        str(registry.certs),
        *creds,
        f"docker://{registry.server.host}/providers/{namespace}/null:2.0.0",
        f"oci:{layout}:2.0.0",
    )
    assert result.returncode == 0, result.stderr
    # skopeo 1.9 writes the index again with the image-spec 1.0 fields it
    # knows (artifactType is dropped); the platforms and their bytes are kept.
    index = _layout_manifest(layout)
    entries = index["manifests"]
    seen = {f"{m['platform']['os']}_{m['platform']['architecture']}" for m in entries}
    assert seen == set(PLATFORMS)
    for entry in entries:
        manifest = json.loads(_layout_blob(layout, entry["digest"]))
        [layer] = manifest["layers"]
        assert layer["mediaType"] == "archive/zip"
        data = _layout_blob(layout, layer["digest"])
        assert "sha256:" + hashlib.sha256(data).hexdigest() == layer["digest"]


def _oras(registry: Registry, token: str = "") -> oras.client.OrasClient:
    client = oras.client.OrasClient(
        hostname=registry.server.host, tls_verify=str(registry.server.ca_pem)
    )
    if token:
        client.auth.set_basic_auth("user", token)
    return client


@pytest.mark.parametrize("namespace", ["open", "secret"])
def test_oras_pulls_a_module(registry: Registry, namespace: str, tmp_path: Path) -> None:
    client = _oras(registry, registry.token if namespace == "secret" else "")
    target = f"{registry.server.host}/modules/{namespace}/vpc/aws:1.0.0"
    [pulled] = client.pull(target=target, outdir=str(tmp_path))
    assert Path(pulled).name == "vpc-aws-1.0.0.zip"
    with zipfile.ZipFile(pulled) as zipped:
        assert "main.tf" in zipped.namelist()
    assert client.get_tags(f"{registry.server.host}/modules/{namespace}/vpc/aws") == ["1.0.0"]


@pytest.mark.parametrize("namespace", ["open", "secret"])
def test_oras_pulls_one_platform_of_a_provider(
    registry: Registry, namespace: str, tmp_path: Path
) -> None:
    client = _oras(registry, registry.token if namespace == "secret" else "")
    repository = f"{registry.server.host}/providers/{namespace}/null"
    index = client.get_manifest(
        f"{repository}:2.0.0", allowed_media_type=["application/vnd.oci.image.index.v1+json"]
    )
    entry = next(m for m in index["manifests"] if m["platform"]["os"] == "linux")
    [pulled] = client.pull(target=f"{repository}@{entry['digest']}", outdir=str(tmp_path))
    assert Path(pulled).name == "terraform-provider-null_2.0.0_linux_amd64.zip"
    manifest = client.get_manifest(f"{repository}@{entry['digest']}")
    digest = "sha256:" + hashlib.sha256(Path(pulled).read_bytes()).hexdigest()
    assert manifest["layers"][0]["digest"] == digest


def test_oras_without_credentials_is_refused_a_private_module(
    registry: Registry, tmp_path: Path
) -> None:
    client = _oras(registry)
    with pytest.raises(Exception, match=r"401|nauthorized"):
        client.pull(
            target=f"{registry.server.host}/modules/secret/vpc/aws:1.0.0", outdir=str(tmp_path)
        )

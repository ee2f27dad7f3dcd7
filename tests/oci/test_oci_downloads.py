"""`oci_module_downloads`: a module `download` answers OpenTofu 1.10 and later
with an `oci://` source pinned by manifest digest; everyone else, and private
namespaces, keep the archive URL."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gitreg.oci.downloads import reads_oci
from gitreg.services import Services
from tests.oci.conftest import make_token, serve
from tests.support.gitrepo import GitRepo

JSON = {"accept": "application/json"}
TOFU = {**JSON, "user-agent": "OpenTofu/1.10.0"}


@pytest.fixture
def registry(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> Iterator[tuple[TestClient, Services]]:
    served = serve(tmp_path, make_repo, oci_module_downloads=True)
    client, svc = next(served)
    mono = make_repo("mono")
    mono.write("modules/net/main.tf", 'output "x" { value = 1 }\n')
    mono.write("common/main.tf", "")
    mono.commit()
    mono.tag("v3.0.0")
    record = svc.index.add_repo(str(mono.path), "open/mono")
    svc.index.add_module(record.id, "open", "net", "aws", "modules/net", "")
    svc.publisher.sync_repo(record)
    yield client, svc
    next(served, None)


def _location(client: TestClient, path: str, headers: dict[str, str]) -> str:
    answer = client.get(path, headers=headers)
    assert answer.status_code == 200, answer.text
    location: str = answer.json()["location"]
    assert answer.headers["x-terraform-get"] == location
    return location


def test_opentofu_gets_an_oci_source_pinned_by_digest(
    registry: tuple[TestClient, Services],
) -> None:
    client, _ = registry
    location = _location(client, "/v1/modules/open/vpc/aws/1.0.0/download", TOFU)
    digest = client.get("/v2/modules/open/vpc/aws/manifests/1.0.0").headers["docker-content-digest"]
    assert location == f"oci://registry.example.com/modules/open/vpc/aws?digest={digest}"


def test_a_module_in_a_directory_keeps_its_subdir(registry: tuple[TestClient, Services]) -> None:
    client, _ = registry
    location = _location(client, "/v1/modules/open/net/aws/3.0.0/download", TOFU)
    assert location.startswith("oci://registry.example.com/modules/open/net/aws//modules/net?")
    digest = location.rsplit("digest=", 1)[1]
    manifest = client.get(f"/v2/modules/open/net/aws/manifests/{digest}").json()
    blob = client.get(f"/v2/modules/open/net/aws/blobs/{manifest['layers'][0]['digest']}")
    names = zipfile.ZipFile(io.BytesIO(blob.content)).namelist()
    assert "modules/net/main.tf" in names and "common/main.tf" in names


@pytest.mark.parametrize(
    "agent", ["OpenTofu/1.9.1", "Terraform/1.11.0", "OpenTofu/1.10.0-beta1", "curl/8"]
)
def test_other_clients_keep_the_archive_url(
    registry: tuple[TestClient, Services], agent: str
) -> None:
    client, _ = registry
    location = _location(
        client, "/v1/modules/open/vpc/aws/1.0.0/download", {**JSON, "user-agent": agent}
    )
    expected = "oci://" if reads_oci(agent.encode()) else "https://registry.example.com/archives/"
    assert location.startswith(expected)


def test_a_private_namespace_keeps_the_signed_archive_url(
    registry: tuple[TestClient, Services],
) -> None:
    client, svc = registry
    token = make_token(svc, "read", ["secret"])
    headers = {**TOFU, "authorization": f"Bearer {token}"}
    location = _location(client, "/v1/modules/secret/vpc/aws/1.0.0/download", headers)
    assert location.startswith("https://registry.example.com/archives/")
    assert "signature=" in location


def test_the_setting_is_off_by_default(tmp_path: Path, make_repo: Callable[[str], GitRepo]) -> None:
    served = serve(tmp_path, make_repo)
    client, _ = next(served)
    location = _location(client, "/v1/modules/open/vpc/aws/1.0.0/download", TOFU)
    assert location.startswith("https://registry.example.com/archives/")
    next(served, None)


def test_user_agents() -> None:
    assert reads_oci(b"OpenTofu/1.10.0")
    assert reads_oci(b"OpenTofu/1.12.3 extra")
    assert reads_oci(b"OpenTofu/2.0.0")
    assert not reads_oci(b"OpenTofu/1.9.9")
    assert not reads_oci(None)
    assert not reads_oci(b"Terraform/1.12.0")

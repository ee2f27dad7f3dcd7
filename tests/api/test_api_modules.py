"""modules.v1, discovery and archive downloads over HTTP (in-process client)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo, simple_module


@pytest.fixture
def client(tmp_path: Path, make_repo: Callable[[str], GitRepo]) -> Iterator[TestClient]:
    settings = load_settings(
        {"data_dir": tmp_path / "data", "public_url": "https://registry.example.com"}, environ={}
    )
    app = create_app(settings)
    svc = app.state.services
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    for tag in ("v1.0.0", "v1.1.0", "v2.0.0-rc1"):
        repo.tag(tag)
    record = svc.index.add_repo(str(repo.path), "acme/vpc")
    svc.index.add_module(record.id, "acme", "vpc", "aws", "", "")
    svc.index.add_module(record.id, "acme", "mono", "aws", "modules/x", "")
    repo.write("modules/x/main.tf", "# x\n")
    repo.commit("mono")
    repo.tag("v3.0.0")
    svc.publisher.sync_repo(record)
    with TestClient(app, base_url="https://testserver") as test_client:
        yield test_client


def test_discovery_lists_modules_v1(client: TestClient) -> None:
    answer = client.get("/.well-known/terraform.json")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["modules.v1"] == "/v1/modules/"


def test_versions_lists_every_version(client: TestClient) -> None:
    answer = client.get("/v1/modules/acme/vpc/aws/versions")
    assert answer.status_code == 200
    listed = [v["version"] for v in answer.json()["modules"][0]["versions"]]
    assert listed == ["1.0.0", "1.1.0", "2.0.0-rc1", "3.0.0"]


def test_versions_carry_an_etag_and_answer_304(client: TestClient) -> None:
    first = client.get("/v1/modules/acme/vpc/aws/versions")
    etag = first.headers["etag"]
    assert first.headers["cache-control"] == "no-cache"
    again = client.get("/v1/modules/acme/vpc/aws/versions", headers={"if-none-match": etag})
    assert again.status_code == 304
    stale = client.get("/v1/modules/acme/vpc/aws/versions", headers={"if-none-match": '"x"'})
    assert stale.status_code == 200


def test_cached_downloads_keep_prerelease_case(client: TestClient) -> None:
    assert client.get("/v1/modules/acme/vpc/aws/2.0.0-rc1/download").status_code == 204
    assert client.get("/v1/modules/acme/vpc/aws/2.0.0-RC1/download").status_code == 404
    assert client.get("/v1/modules/ACME/vpc/aws/2.0.0-rc1/download").status_code == 204


def test_names_match_case_insensitively(client: TestClient) -> None:
    assert client.get("/v1/modules/ACME/Vpc/AWS/versions").status_code == 200


def test_download_is_204_with_absolute_archive_url(client: TestClient) -> None:
    answer = client.get("/v1/modules/acme/vpc/aws/1.1.0/download")
    assert answer.status_code == 204
    location = answer.headers["x-terraform-get"]
    assert location.startswith("https://registry.example.com/archives/")
    assert location.endswith(".tar.gz")


def test_download_for_monorepo_module_selects_subdir(client: TestClient) -> None:
    answer = client.get("/v1/modules/acme/mono/aws/3.0.0/download")
    assert answer.headers["x-terraform-get"].endswith(".tar.gz//modules/x")


def test_download_as_json_for_opentofu(client: TestClient) -> None:
    answer = client.get(
        "/v1/modules/acme/vpc/aws/1.0.0/download", headers={"accept": "application/json"}
    )
    assert answer.status_code == 200
    assert answer.json()["location"] == answer.headers["x-terraform-get"]


def test_archive_head_and_get_agree_and_are_immutable(client: TestClient) -> None:
    location = client.get("/v1/modules/acme/vpc/aws/1.0.0/download").headers["x-terraform-get"]
    path = location.removeprefix("https://registry.example.com")
    head = client.head(path)
    body = client.get(path)
    assert head.status_code == body.status_code == 200
    assert int(head.headers["content-length"]) == len(body.content) > 0
    sha = path.split("/")[-1].removesuffix(".tar.gz")
    assert hashlib.sha256(body.content).hexdigest() == sha
    assert head.headers["etag"] == f'"{sha}"'
    assert "immutable" in head.headers["cache-control"]
    again = client.get(path, headers={"if-none-match": f'"{sha}"'})
    assert again.status_code == 304


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/modules/acme/nope/aws/versions", 404),
        ("/v1/modules/acme/vpc/aws/9.9.9/download", 404),
        ("/v1/modules/acme/vpc/aws/not-a-version/download", 400),
        ("/v1/modules/ac%00me/vpc/aws/versions", 400),
        ("/v1/modules/acme/vpc/a-ws/versions", 400),
        ("/v1/modules/" + "a" * 5000 + "/vpc/aws/versions", 400),
        ("/archives/" + "0" * 64 + ".tar.gz", 404),
        ("/archives/..%2F..%2Fetc%2Fpasswd.tar.gz", 404),
        ("/no/such/route", 404),
    ],
)
def test_bad_requests_get_json_errors(client: TestClient, path: str, status: int) -> None:
    answer = client.get(path)
    assert answer.status_code == status
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["errors"]


def test_wrong_method_is_a_json_405(client: TestClient) -> None:
    answer = client.post("/v1/modules/acme/vpc/aws/versions")
    assert answer.status_code == 405
    assert answer.json()["errors"]


def test_publish_invalidates_cached_versions(
    client: TestClient, make_repo: Callable[[str], GitRepo]
) -> None:
    assert "3.1.0" not in client.get("/v1/modules/acme/vpc/aws/versions").text
    svc = client.app.state.services  # type: ignore[attr-defined]
    record = svc.index.repos()[0]
    repo = GitRepo.__new__(GitRepo)
    repo.path = Path(record.url)
    repo.write("later.tf", "# later\n")
    repo.commit("later")
    repo.tag("v3.1.0")
    svc.publisher.sync_repo(record)
    assert "3.1.0" in client.get("/v1/modules/acme/vpc/aws/versions").text


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}

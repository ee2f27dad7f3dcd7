"""providers.v1 over HTTP, the files it points at, and CI uploads (spec:
provider-registry-protocol.md)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.auth.tokens import new_token, token_hash
from gitreg.services import Services
from tests.support.provider_dist import (
    Dist,
    count_zip_entries_read,
    key_id,
    make_dist,
    make_services,
    public_armor,
    publisher_key,
    reuse_generated_key,
    zip_of_directories,
)

BINARY = b"\x7fELF fake provider" * 200
PLATFORMS = ("linux_amd64", "darwin_arm64")
BASE = "https://registry.example.com"
UPLOADS = "/api/v1/providers/acme/null/1.2.0/uploads"


@pytest.fixture
def client(svc: Services) -> Iterator[TestClient]:
    with TestClient(create_app(svc.settings, svc), base_url=BASE) as test_client:
        yield test_client


def _token(svc: Services, scope: str, namespaces: list[str]) -> dict[str, str]:
    token = new_token()
    svc.auth.add_token(token_hash(token), token[:12], scope, namespaces, "test", None)
    svc.cache.invalidate()
    return {"Authorization": f"Bearer {token}"}


def _upload(client: TestClient, headers: dict[str, str], dist: Dist, sign: bool = False) -> object:
    created = client.post(UPLOADS.replace("1.2.0", dist.version), headers=headers)
    assert created.status_code == 201, created.text
    url = created.json()["url"]
    for name, data in dist.files.items():
        answer = client.put(f"{url}/{name}", content=data, headers=headers)
        assert answer.status_code == 201, answer.text
    return client.post(f"{url}/publish", json={"sign": sign}, headers=headers)


@pytest.fixture
def published(svc: Services, client: TestClient) -> Dist:
    dist = make_dist("null", "1.2.0", PLATFORMS, BINARY, publisher_key())
    answer = _upload(client, _token(svc, "publish", ["acme"]), dist)
    assert answer.status_code == 201, answer.text  # type: ignore[attr-defined]
    return dist


def test_discovery_names_providers_v1(client: TestClient) -> None:
    body = client.get("/.well-known/terraform.json").json()
    assert body["providers.v1"] == "/v1/providers/"


def test_versions_list_protocols_and_platforms(client: TestClient, published: Dist) -> None:
    answer = client.get("/v1/providers/ACME/Null/versions")  # Terraform may keep the case
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "versions": [
            {
                "version": "1.2.0",
                "protocols": ["5.0"],
                "platforms": [
                    {"os": "darwin", "arch": "arm64"},
                    {"os": "linux", "arch": "amd64"},
                ],
            }
        ]
    }


def test_download_has_every_field_terraform_checks(client: TestClient, published: Dist) -> None:
    body = client.get("/v1/providers/acme/null/1.2.0/download/linux/amd64").json()
    zip_name = published.zip_name("linux_amd64")
    assert body["os"] == "linux" and body["arch"] == "amd64"
    assert body["protocols"] == ["5.0"]
    assert body["filename"] == zip_name
    assert re.fullmatch(r"[0-9a-f]{64}", body["shasum"])
    assert body["download_url"].startswith(BASE + "/v1/providers/acme/null/1.2.0/files/")
    keys = body["signing_keys"]["gpg_public_keys"]
    assert [k["key_id"] for k in keys] == [key_id(publisher_key())]
    assert keys[0]["ascii_armor"].startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    # The three URLs serve, without credentials, exactly what was published.
    assert client.get(body["download_url"]).content == published.files[zip_name]
    sums = client.get(body["shasums_url"])
    assert sums.content == published.files[published.shasums_name]
    assert f"{body['shasum']}  {zip_name}\n" in sums.text
    sig = client.get(body["shasums_signature_url"])
    assert sig.content == published.files[published.shasums_name + ".sig"]


def test_files_are_immutable_and_head_has_the_length(client: TestClient, published: Dist) -> None:
    path = f"/v1/providers/acme/null/1.2.0/files/{published.zip_name('linux_amd64')}"
    head = client.head(path)
    assert head.status_code == 200
    assert int(head.headers["content-length"]) == len(
        published.files[published.zip_name("linux_amd64")]
    )
    assert "immutable" in head.headers["cache-control"]
    again = client.get(path, headers={"If-None-Match": head.headers["etag"]})
    assert again.status_code == 304


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/providers/acme/nothing/versions", 404),
        ("/v1/providers/acme/null/9.9.9/download/linux/amd64", 404),
        ("/v1/providers/acme/null/1.2.0/download/plan9/mips", 404),
        ("/v1/providers/acme/null/1.2.0/files/terraform-provider-null_1.2.0_plan9_mips.zip", 404),
        ("/v1/providers/acme/null/v1.2.0/download/linux/amd64", 400),
        ("/v1/providers/acme/null/1.2.0/download/Linux!/amd64", 400),
        ("/v1/providers/-acme/null/versions", 400),
        ("/v1/providers/acme/null/1.2.0/files/..%2F..%2Findex.sqlite3", 404),
    ],
)
def test_unknown_and_malformed_requests_get_json_errors(
    client: TestClient, published: Dist, path: str, status: int
) -> None:
    answer = client.get(path)
    assert answer.status_code == status
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["errors"]


def test_upload_needs_a_publish_token_for_the_namespace(svc: Services, client: TestClient) -> None:
    assert client.post(UPLOADS).status_code == 401
    assert client.post(UPLOADS, headers=_token(svc, "read", ["acme"])).status_code == 403
    assert client.post(UPLOADS, headers=_token(svc, "publish", ["other"])).status_code == 403


def test_upload_refuses_foreign_files_and_oversize_bodies(
    svc: Services, client: TestClient
) -> None:
    headers = _token(svc, "publish", ["acme"])
    url = client.post(UPLOADS, headers=headers).json()["url"]
    assert client.put(f"{url}/config.yaml", content=b"x", headers=headers).status_code == 400
    too_big = b"x" * (64 * 1024 + 1)
    manifest = f"{url}/terraform-provider-null_1.2.0_manifest.json"
    assert client.put(manifest, content=too_big, headers=headers).status_code == 413
    other = "/api/v1/providers/acme/null/1.3.0/uploads/" + url.rsplit("/", 1)[-1]
    assert client.put(f"{other}/x.zip", content=b"x", headers=headers).status_code == 404
    bad = client.post(f"{url}/publish", content=b"[1", headers=headers)
    assert bad.status_code == 400


def test_republish_over_http_is_200_then_409(
    svc: Services, client: TestClient, published: Dist
) -> None:
    headers = _token(svc, "publish", ["acme"])
    same = _upload(client, headers, published)
    assert same.status_code == 200 and same.json()["status"] == "unchanged"  # type: ignore[attr-defined]
    other = make_dist("null", "1.2.0", PLATFORMS, BINARY + b"!", publisher_key())
    conflict = _upload(client, headers, other)
    assert conflict.status_code == 409  # type: ignore[attr-defined]
    assert "immutable" in conflict.json()["errors"][0]  # type: ignore[attr-defined]


@pytest.mark.slow
def test_upload_with_sign_is_signed_by_the_namespace_key(
    svc: Services, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    reuse_generated_key(monkeypatch)
    key = svc.provider_publisher.keys.generate("acme")
    dist = make_dist("null", "2.0.0", PLATFORMS, BINARY, signer=None, with_shasums=False)
    answer = _upload(client, _token(svc, "publish", ["acme"]), dist, sign=True)
    assert answer.status_code == 201  # type: ignore[attr-defined]
    assert answer.json()["key_id"] == key.key_id  # type: ignore[attr-defined]
    body = client.get("/v1/providers/acme/null/2.0.0/download/darwin/arm64").json()
    assert body["signing_keys"]["gpg_public_keys"][0]["key_id"] == key.key_id


def test_private_namespace_hands_out_signed_file_urls(
    svc: Services, client: TestClient, published: Dist
) -> None:
    svc.auth.set_namespace_private("acme", True)
    svc.cache.invalidate()
    assert client.get("/v1/providers/acme/null/versions").status_code == 401
    headers = _token(svc, "read", ["acme"])
    body = client.get("/v1/providers/acme/null/1.2.0/download/linux/amd64", headers=headers).json()
    assert "signature=" in body["download_url"]
    # Terraform fetches files without credentials: the signed URL works, the bare path not.
    assert client.get(body["download_url"]).status_code == 200
    assert client.get(body["shasums_signature_url"]).status_code == 200
    assert client.get(body["download_url"].split("?")[0]).status_code == 403


def test_an_upload_with_more_zip_entries_than_the_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    svc = make_services(tmp_path / "data", max_provider_files=5)
    svc.provider_publisher.keys.add("acme", public_armor(publisher_key()))
    dist = make_dist("null", "1.2.0", PLATFORMS, BINARY)
    dist.files[dist.zip_name("linux_amd64")] = zip_of_directories("null", "1.2.0", 200)
    dist.reshasum(publisher_key())
    read = count_zip_entries_read(monkeypatch)
    with TestClient(create_app(svc.settings, svc), base_url=BASE) as client:
        answer = _upload(client, _token(svc, "publish", ["acme"]), dist)
    assert answer.status_code == 422, answer.text  # type: ignore[attr-defined]
    assert "more than 5 entries" in answer.json()["errors"][0]  # type: ignore[attr-defined]
    assert len(read) <= 5  # the other platform's zip only
    assert not [r for r in caplog.records if "d1/" in r.getMessage()]
    assert svc.provider_publisher.store.provider_version(1, "1.2.0") is None


def test_download_lists_every_platforms_hashes(client: TestClient, published: Dist) -> None:
    """OpenTofu 1.12's `packages`: all platforms, whichever was asked for, each
    with its `zh:` (the zip's sha256) and `h1:` hashes and its size."""
    body = client.get("/v1/providers/acme/null/1.2.0/download/linux/amd64").json()
    assert sorted(body["packages"]) == sorted(PLATFORMS)
    for platform, entry in body["packages"].items():
        data = published.files[published.zip_name(platform)]
        zh, h1 = entry["hashes"]
        assert zh == "zh:" + hashlib.sha256(data).hexdigest()
        assert h1.startswith("h1:") and len(h1) == 47
        assert entry["package_size"] == len(data)
    assert body["packages"]["linux_amd64"]["hashes"][0] == "zh:" + body["shasum"]

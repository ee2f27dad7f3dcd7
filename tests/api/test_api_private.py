"""Private namespaces over HTTP: tokens, no existence leaks, signed archive URLs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.auth.tokens import new_token, token_hash
from gitreg.services import Services
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo, simple_module

BASE = "https://registry.example.com"


@pytest.fixture
def app_client(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> Iterator[tuple[TestClient, Services]]:
    settings = load_settings(
        {"data_dir": tmp_path / "data", "public_url": BASE, "auth_fail_limit": 5}, environ={}
    )
    app = create_app(settings)
    svc: Services = app.state.services
    for namespace in ("secret", "open"):
        repo = make_repo(namespace)
        simple_module(repo, namespace)
        repo.commit()
        repo.tag("v1.0.0")
        record = svc.index.add_repo(str(repo.path), f"{namespace}/vpc")
        svc.index.add_module(record.id, namespace, "vpc", "aws", "", "")
        svc.publisher.sync_repo(record)
    svc.auth.set_namespace_private("secret", True)
    with TestClient(app, base_url="https://testserver") as client:
        yield client, svc


def _token(svc: Services, scope: str, namespaces: list[str], expires: float | None = None) -> str:
    token = new_token()
    svc.auth.add_token(token_hash(token), token[:12], scope, namespaces, "", expires)
    svc.cache.invalidate()
    return token


def _auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def test_private_namespace_needs_a_token(app_client: tuple[TestClient, Services]) -> None:
    client, _ = app_client
    answer = client.get("/v1/modules/secret/vpc/aws/versions")
    assert answer.status_code == 401
    assert "authentication required" in answer.json()["errors"][0]
    assert answer.headers["www-authenticate"].startswith("Bearer")


def test_public_namespace_needs_nothing(app_client: tuple[TestClient, Services]) -> None:
    client, _ = app_client
    assert client.get("/v1/modules/open/vpc/aws/versions").status_code == 200


def test_read_token_for_the_namespace_reads(app_client: tuple[TestClient, Services]) -> None:
    client, svc = app_client
    token = _token(svc, "read", ["secret"])
    assert (
        client.get("/v1/modules/Secret/vpc/aws/versions", headers=_auth(token)).status_code == 200
    )


def test_token_for_another_namespace_sees_nothing(app_client: tuple[TestClient, Services]) -> None:
    client, svc = app_client
    token = _token(svc, "read", ["open"])
    existing = client.get("/v1/modules/secret/vpc/aws/versions", headers=_auth(token))
    missing = client.get("/v1/modules/secret/nope/aws/versions", headers=_auth(token))
    assert existing.status_code == missing.status_code == 404
    assert existing.json()["errors"][0] == "module secret/vpc/aws not found"


@pytest.mark.parametrize("header", ["Bearer gitreg_wrong", "Basic abc", "Bearer ", "Token x"])
def test_bad_credentials_are_401(app_client: tuple[TestClient, Services], header: str) -> None:
    client, _ = app_client
    answer = client.get("/v1/modules/secret/vpc/aws/versions", headers={"authorization": header})
    assert answer.status_code == 401
    assert "gitreg_wrong" not in answer.text


def test_expired_and_revoked_tokens_are_refused(app_client: tuple[TestClient, Services]) -> None:
    client, svc = app_client
    expired = _token(svc, "read", ["secret"], expires=time.time() - 1)
    assert (
        client.get("/v1/modules/secret/vpc/aws/versions", headers=_auth(expired)).status_code == 401
    )
    token = _token(svc, "read", ["secret"])
    token_id = svc.auth.tokens()[-1].id
    svc.auth.revoke(token_id)
    svc.cache.invalidate()
    assert (
        client.get("/v1/modules/secret/vpc/aws/versions", headers=_auth(token)).status_code == 401
    )


def test_repeated_failures_are_rate_limited(app_client: tuple[TestClient, Services]) -> None:
    client, svc = app_client
    for _ in range(5):
        client.get("/v1/modules/secret/vpc/aws/versions", headers=_auth("gitreg_bad"))
    limited = client.get("/v1/modules/secret/vpc/aws/versions", headers=_auth("gitreg_bad"))
    assert limited.status_code == 429
    assert int(limited.headers["retry-after"]) >= 1
    good = _token(svc, "read", ["secret"])
    assert client.get("/v1/modules/secret/vpc/aws/versions", headers=_auth(good)).status_code == 429


def _archive_url(client: TestClient, token: str | None, namespace: str) -> str:
    headers = _auth(token) if token else {}
    answer = client.get(f"/v1/modules/{namespace}/vpc/aws/1.0.0/download", headers=headers)
    assert answer.status_code == 204
    return answer.headers["x-terraform-get"].removeprefix(BASE)


def test_private_archive_is_served_only_through_its_signed_url(
    app_client: tuple[TestClient, Services],
) -> None:
    client, svc = app_client
    url = _archive_url(client, _token(svc, "read", ["secret"]), "secret")
    assert "signature=" in url and "expires=" in url
    assert client.head(url).status_code == 200
    assert client.get(url).status_code == 200
    bare = url.split("?")[0]
    assert client.get(bare).status_code == 403
    assert client.head(bare).status_code == 403


@pytest.mark.parametrize("part", ["path", "expires", "signature"])
def test_tampered_archive_urls_are_403(app_client: tuple[TestClient, Services], part: str) -> None:
    client, svc = app_client
    url = _archive_url(client, _token(svc, "read", ["secret"]), "secret")
    path, query = url.split("?")
    params = dict(p.split("=", 1) for p in query.split("&"))
    if part == "path":
        path = path.replace(path[12:20], "0" * 8)
    elif part == "expires":
        params["expires"] = str(int(params["expires"]) + 1)
    else:
        first = params["signature"][0]
        # A different first character (one signature in 64 starts with "A").
        params["signature"] = ("B" if first == "A" else "A") + params["signature"][1:]
    answer = client.get(path + "?" + "&".join(f"{k}={v}" for k, v in params.items()))
    assert answer.status_code in (403, 404)
    assert answer.json()["errors"]


def test_public_archives_keep_plain_cacheable_urls(app_client: tuple[TestClient, Services]) -> None:
    client, _ = app_client
    url = _archive_url(client, None, "open")
    assert "?" not in url
    answer = client.get(url)
    assert answer.status_code == 200 and "immutable" in answer.headers["cache-control"]


def test_registry_default_token_makes_unlisted_namespaces_private(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    settings = load_settings(
        {"data_dir": tmp_path / "d", "read_default": "token", "public_url": BASE}, environ={}
    )
    app = create_app(settings)
    svc: Services = app.state.services
    repo = make_repo("x")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    record = svc.index.add_repo(str(repo.path), "x/vpc")
    svc.index.add_module(record.id, "team", "vpc", "aws", "", "")
    svc.publisher.sync_repo(record)
    with TestClient(app, base_url="https://testserver") as client:
        assert client.get("/v1/modules/team/vpc/aws/versions").status_code == 401
        svc.auth.set_namespace_private("team", False)
        svc.cache.invalidate()
        assert client.get("/v1/modules/team/vpc/aws/versions").status_code == 200


def test_a_missing_scope_is_named_with_its_article(
    app_client: tuple[TestClient, Services],
) -> None:
    client, svc = app_client
    unsigned = client.get("/admin/conflicts")
    assert unsigned.status_code == 401
    assert unsigned.json()["errors"] == ["this action needs an admin token (gitreg token create)"]
    read = _auth(_token(svc, "read", ["secret"]))
    answer = client.get("/admin/conflicts", headers=read)
    assert (answer.status_code, answer.json()["errors"]) == (
        403,
        ["this action needs an admin token"],
    )

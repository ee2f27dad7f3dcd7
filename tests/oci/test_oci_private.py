"""A private namespace through `/v2/`: every route, every kind of content,
invisible without a read token and answered as the Docker token flow expects."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from starlette.testclient import TestClient

from gitreg.oci import grants
from gitreg.services import Services
from tests.oci.conftest import BASE, make_token, serve
from tests.support.gitrepo import GitRepo

SECRET_MODULE = "modules/secret/vpc/aws"
SECRET_PROVIDER = "providers/secret/null"
MISSING = ("modules/secret/nope/aws", "providers/secret/nope")


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def _basic(password: str, user: str = "anyone") -> dict[str, str]:
    raw = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"authorization": f"Basic {raw}"}


def _paths(client: TestClient, headers: dict[str, str]) -> list[str]:
    """Every read route of the private module and provider, with real digests."""
    paths: list[str] = []
    module = f"/v2/{SECRET_MODULE}"
    manifest = client.get(f"{module}/manifests/1.0.0", headers=headers)
    assert manifest.status_code == 200, manifest.text
    digest = manifest.headers["docker-content-digest"]
    body = manifest.json()
    paths += [
        f"{module}/tags/list",
        f"{module}/manifests/1.0.0",
        f"{module}/manifests/{digest}",
        f"{module}/blobs/{body['layers'][0]['digest']}",
        f"{module}/blobs/{body['config']['digest']}",
        f"{module}/referrers/{digest}",
    ]
    provider = f"/v2/{SECRET_PROVIDER}"
    index = client.get(f"{provider}/manifests/2.0.0", headers=headers)
    index_digest = index.headers["docker-content-digest"]
    platform_digest = index.json()["manifests"][0]["digest"]
    platform = client.get(f"{provider}/manifests/{platform_digest}", headers=headers).json()
    paths += [
        f"{provider}/tags/list",
        f"{provider}/manifests/2.0.0",
        f"{provider}/manifests/{index_digest}",
        f"{provider}/manifests/{platform_digest}",
        f"{provider}/blobs/{platform['layers'][0]['digest']}",
        f"{provider}/blobs/{platform['config']['digest']}",
        f"{provider}/referrers/{index_digest}",
    ]
    return paths


@pytest.fixture
def secret_paths(registry: tuple[TestClient, Services]) -> list[str]:
    client, svc = registry
    return _paths(client, _bearer(make_token(svc, "read", ["secret"])))


def test_every_route_needs_credentials(
    registry: tuple[TestClient, Services], secret_paths: list[str]
) -> None:
    client, _ = registry
    missing = [f"/v2/{name}/tags/list" for name in MISSING]
    missing += [f"/v2/{name}/manifests/1.0.0" for name in MISSING]
    for path in [*secret_paths, *missing]:
        for method in ("GET", "HEAD"):
            answer = client.request(method, path)
            assert answer.status_code == 401, (method, path)
            name = path[len("/v2/") :].rsplit("/", 2)[0]
            assert answer.headers["www-authenticate"] == (
                f'Bearer realm="{BASE}/v2/token",service="registry.example.com",'
                f'scope="repository:{name}:pull"'
            )
            if method == "GET":
                assert [e["code"] for e in answer.json()["errors"]] == ["UNAUTHORIZED"]


def test_a_token_for_another_namespace_sees_nothing(
    registry: tuple[TestClient, Services], secret_paths: list[str]
) -> None:
    client, svc = registry
    other = _bearer(make_token(svc, "read", ["open"]))
    missing = [f"/v2/{name}/manifests/1.0.0" for name in MISSING]
    for path in [*secret_paths, *missing]:
        answer = client.get(path, headers=other)
        assert answer.status_code == 404, path
        assert [e["code"] for e in answer.json()["errors"]] == ["NAME_UNKNOWN"]


@pytest.mark.parametrize("form", ["bearer", "basic"])
def test_a_read_token_reads_every_route(
    registry: tuple[TestClient, Services], secret_paths: list[str], form: str
) -> None:
    client, svc = registry
    token = make_token(svc, "read", ["secret"])
    headers = _bearer(token) if form == "bearer" else _basic(token)
    for path in secret_paths:
        answer = client.get(path, headers=headers)
        assert answer.status_code == 200, path
        assert answer.headers["cache-control"] == "private, no-store", path
        paged = client.get(f"/v2/{SECRET_MODULE}/tags/list?n=1", headers=headers)
        assert paged.headers["cache-control"] == "private, no-store"


def test_token_flow_with_basic_credentials(
    registry: tuple[TestClient, Services], secret_paths: list[str]
) -> None:
    client, svc = registry
    challenge = client.get(secret_paths[1]).headers["www-authenticate"]
    params = dict(part.split("=", 1) for part in challenge[len("Bearer ") :].split(","))
    realm = urlsplit(params["realm"].strip('"'))
    query = {"service": params["service"].strip('"'), "scope": params["scope"].strip('"')}
    user_token = make_token(svc, "read", ["secret"])
    issued = client.get(realm.path, params=query, headers=_basic(user_token))
    assert issued.status_code == 200
    body = issued.json()
    assert body["token"] == body["access_token"] and body["expires_in"] > 0
    assert body["token"] != user_token
    pull = _bearer(body["token"])
    module_paths = [p for p in secret_paths if SECRET_MODULE in p]
    for path in module_paths:
        assert client.get(path, headers=pull).status_code == 200, path
    # Not covered by this token: a fresh challenge for that repository.
    provider = client.get(f"/v2/{SECRET_PROVIDER}/tags/list", headers=pull)
    assert provider.status_code == 401
    assert f'scope="repository:{SECRET_PROVIDER}:pull"' in provider.headers["www-authenticate"]


def test_token_flow_for_a_namespace_the_credentials_cannot_read(
    registry: tuple[TestClient, Services],
) -> None:
    client, svc = registry
    scope = f"repository:{SECRET_MODULE}:pull"
    issued = client.get(
        "/v2/token", params={"scope": scope}, headers=_basic(make_token(svc, "read", ["open"]))
    )
    answer = client.get(f"/v2/{SECRET_MODULE}/tags/list", headers=_bearer(issued.json()["token"]))
    assert answer.status_code == 404
    assert [e["code"] for e in answer.json()["errors"]] == ["NAME_UNKNOWN"]


def test_anonymous_token_opens_public_repositories_only(
    registry: tuple[TestClient, Services],
) -> None:
    client, _ = registry
    scopes = [f"repository:{SECRET_MODULE}:pull", "repository:modules/open/vpc/aws:pull"]
    token = client.get("/v2/token", params={"scope": scopes}).json()["token"]
    assert client.get(f"/v2/{SECRET_MODULE}/tags/list", headers=_bearer(token)).status_code == 401
    opened = client.get("/v2/modules/open/vpc/aws/tags/list", headers=_bearer(token))
    assert opened.status_code == 200


def test_oauth2_form_post_takes_a_refresh_token(registry: tuple[TestClient, Services]) -> None:
    client, svc = registry
    form = {
        "grant_type": "refresh_token",
        "refresh_token": make_token(svc, "read", ["secret"]),
        "service": "registry.example.com",
        "scope": f"repository:{SECRET_MODULE}:pull",
    }
    issued = client.post("/v2/token", data=form)
    assert issued.status_code == 200
    answer = client.get(f"/v2/{SECRET_MODULE}/tags/list", headers=_bearer(issued.json()["token"]))
    assert answer.status_code == 200


def test_a_pull_token_for_other_repositories_is_an_insufficient_scope_challenge(
    registry: tuple[TestClient, Services],
) -> None:
    client, svc = registry
    reader = _basic(make_token(svc, "read", ["secret"]))
    scope = f"repository:{SECRET_PROVIDER}:pull"
    token = client.get("/v2/token", params={"scope": scope}, headers=reader).json()["token"]
    answer = client.get(f"/v2/{SECRET_MODULE}/tags/list", headers=_bearer(token))
    assert answer.status_code == 401
    assert [e["code"] for e in answer.json()["errors"]] == ["UNAUTHORIZED"]
    assert answer.headers["www-authenticate"] == (
        f'Bearer realm="{BASE}/v2/token",service="{urlsplit(BASE).netloc}",'
        f'scope="repository:{SECRET_MODULE}:pull",error="insufficient_scope"'
    )
    # No token at all is a plain challenge: nothing was insufficient.
    plain = client.get(f"/v2/{SECRET_MODULE}/tags/list").headers["www-authenticate"]
    assert "error=" not in plain


@pytest.mark.parametrize(
    ("form", "error"),
    [
        ({}, "invalid_request"),
        ({"grant_type": "authorization_code", "code": "x"}, "unsupported_grant_type"),
        ({"grant_type": "client_credentials"}, "unsupported_grant_type"),
        ({"grant_type": "PASSWORD", "password": "{token}"}, "unsupported_grant_type"),
        ({"grant_type": "password"}, "invalid_request"),
        ({"grant_type": "password", "refresh_token": "{token}"}, "invalid_request"),
        ({"grant_type": "refresh_token", "password": "{token}"}, "invalid_request"),
    ],
)
def test_the_oauth2_form_takes_password_and_refresh_token_grants_only(
    registry: tuple[TestClient, Services], form: dict[str, str], error: str
) -> None:
    client, svc = registry
    token = make_token(svc, "read", ["secret"])
    body = {key: value.replace("{token}", token) for key, value in form.items()}
    answer = client.post("/v2/token", data={**body, "scope": f"repository:{SECRET_MODULE}:pull"})
    assert answer.status_code == 400, answer.text
    assert answer.headers["cache-control"] == "no-store"
    refused = answer.json()
    assert set(refused) == {"error", "error_description"}
    assert refused["error"] == error
    assert token not in answer.text


@pytest.mark.parametrize(
    "authorization",
    ["Bearer gitreg_not-a-token", "Basic bm90OmF0b2tlbg==", "Basic !!!", "Bearer oci1.x.1.y"],
)
def test_bad_credentials_are_refused_with_401(
    registry: tuple[TestClient, Services], authorization: str
) -> None:
    client, _ = registry
    headers = {"authorization": authorization}
    assert client.get("/v2/token", headers=headers).status_code == 401
    answer = client.get(f"/v2/{SECRET_MODULE}/tags/list", headers=headers)
    assert answer.status_code == 401
    assert "www-authenticate" in answer.headers
    assert client.get("/v2/", headers=headers).status_code == 401


def test_an_expired_pull_token_is_refused(registry: tuple[TestClient, Services]) -> None:
    client, svc = registry
    signer = svc.access.signer
    token, _ = grants.issue(signer, [SECRET_MODULE], [], 1)
    payload, _expires, signature = token[len(grants.PREFIX) :].split(".")
    forged = f"{grants.PREFIX}{payload}.{int(time.time()) - 1}.{signature}"
    answer = client.get(f"/v2/{SECRET_MODULE}/tags/list", headers=_bearer(forged))
    assert answer.status_code == 401
    assert client.get(f"/v2/{SECRET_MODULE}/tags/list", headers=_bearer(token)).status_code == 200
    other = grants.issue(signer, ["modules/open/vpc/aws"], [], 1)[0]
    swapped = f"{grants.PREFIX}{token.split('.')[1]}.{other.split('.', 2)[2]}"
    assert client.get(f"/v2/{SECRET_MODULE}/tags/list", headers=_bearer(swapped)).status_code == 401


def test_private_zip_is_not_served_by_hash_elsewhere(
    registry: tuple[TestClient, Services], secret_paths: list[str]
) -> None:
    client, _ = registry
    layer = next(p for p in secret_paths if "/blobs/" in p and SECRET_MODULE in p)
    sha256 = layer.rsplit(":", 1)[1]
    assert client.get(f"/archives/{sha256}.tar.gz").status_code in (401, 403)


def test_failed_credentials_count_towards_the_limit(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    served = serve(tmp_path, make_repo, auth_fail_limit=3)
    client, _ = next(served)
    bad = [_bearer("oci1.forged.1.x"), {"authorization": "Basic !!!"}, _basic("gitreg_nope")]
    for headers in bad:
        assert client.get(f"/v2/{SECRET_MODULE}/tags/list", headers=headers).status_code == 401
    answer = client.get(f"/v2/{SECRET_MODULE}/tags/list", headers=bad[0])
    assert answer.status_code == 429
    assert [e["code"] for e in answer.json()["errors"]] == ["TOOMANYREQUESTS"]
    assert "retry-after" in answer.headers
    next(served, None)


@pytest.mark.parametrize(
    ("scope", "code"),
    [
        ("garbage", "UNSUPPORTED"),
        ("repository:modules/open/vpc/aws", "UNSUPPORTED"),
        ("Repository:modules/open/vpc/aws:pull", "UNSUPPORTED"),
        ("repository:modules/open/vpc/aws:pull;rm", "UNSUPPORTED"),
        ("repository:modules/open/vpc/aws:pull\n", "UNSUPPORTED"),
        ("repository::pull", "NAME_INVALID"),
        ("repository:MODULES/open/vpc/aws:pull", "NAME_INVALID"),
        ("repository:modules/../secret/vpc/aws:pull", "NAME_INVALID"),
        ("repository:modules/open/vpc/aws\n:pull", "NAME_INVALID"),
        (f"repository:modules/{'a' * 300}/vpc/aws:pull", "NAME_INVALID"),
        ("repository:modules/\xff/vpc/aws:pull", "NAME_INVALID"),
    ],
)
def test_a_malformed_scope_is_refused_with_400(
    registry: tuple[TestClient, Services], scope: str, code: str
) -> None:
    client, svc = registry
    good = f"repository:{SECRET_MODULE}:pull"
    for headers in ({}, _basic(make_token(svc, "read", ["secret"]))):
        answer = client.get("/v2/token", params={"scope": [good, scope]}, headers=headers)
        assert answer.status_code == 400, (scope, answer.text)
        assert [e["code"] for e in answer.json()["errors"]] == [code]
        assert "scope" in answer.json()["errors"][0]["message"]
    form = {"grant_type": "password", "password": make_token(svc, "read", ["secret"])}
    posted = client.post("/v2/token", data={**form, "scope": f"{good} {scope}"})
    assert posted.status_code == 400


def test_too_many_scopes_are_refused_with_400(registry: tuple[TestClient, Services]) -> None:
    client, _ = registry
    scopes = [f"repository:modules/open/vpc{i}/aws:pull" for i in range(grants.MAX_SCOPES + 1)]
    answer = client.get("/v2/token", params={"scope": scopes})
    assert answer.status_code == 400
    assert client.get("/v2/token", params={"scope": scopes[:-1]}).status_code == 200


@pytest.mark.parametrize(
    "scope",
    [
        f"repository:{SECRET_MODULE}:push",
        "repository(plugin):modules/open/vpc/aws:pull",
        "registry:catalog:*",
        "repository:library/ubuntu:pull",
        "repository:registry.example.com:443/modules/open/vpc/aws:pull",
        "repository:localhost/modules/open/vpc/aws:pull",
        "repository:Registry.Example.com/modules/open/vpc/aws:pull",
        "repository:modules/open/vpc/aws:",
    ],
)
def test_a_well_formed_scope_gitreg_cannot_grant_gives_a_token_without_it(
    registry: tuple[TestClient, Services], scope: str
) -> None:
    client, svc = registry
    credentials = _basic(make_token(svc, "read", ["secret"]))
    issued = client.get("/v2/token", params={"scope": scope}, headers=credentials)
    assert issued.status_code == 200, issued.text
    grant = grants.read(svc.access.signer, issued.json()["token"])
    assert grant.repositories == frozenset() and grant.denied == frozenset()
    pull = _bearer(issued.json()["token"])
    refused = client.get(f"/v2/{SECRET_MODULE}/manifests/1.0.0", headers=pull)
    assert refused.status_code == 401
    assert [e["code"] for e in refused.json()["errors"]] == ["UNAUTHORIZED"]


def test_an_empty_scope_is_no_scope(registry: tuple[TestClient, Services]) -> None:
    client, _ = registry
    assert client.get("/v2/token", params={"scope": ["", " "]}).status_code == 200


def test_a_scope_that_is_not_utf8_is_refused_with_400(
    registry: tuple[TestClient, Services],
) -> None:
    client, _ = registry
    answer = client.get("/v2/token?scope=repository:modules/%ff%fe/vpc/aws:pull")
    assert answer.status_code == 400
    assert [e["code"] for e in answer.json()["errors"]] == ["NAME_INVALID"]


def test_a_pull_token_does_not_open_a_namespace_made_private_after_it(
    registry: tuple[TestClient, Services],
) -> None:
    client, svc = registry
    public = "modules/open/vpc/aws"
    scope = {"scope": f"repository:{public}:pull"}
    anonymous = client.get("/v2/token", params=scope).json()["token"]
    other = _basic(make_token(svc, "read", ["secret"]))
    credentialed = client.get("/v2/token", params=scope, headers=other).json()["token"]
    for token in (anonymous, credentialed):
        assert grants.read(svc.access.signer, token).repositories == frozenset()
        assert client.get(f"/v2/{public}/tags/list", headers=_bearer(token)).status_code == 200
    svc.auth.set_namespace_private("open", True)
    svc.cache.invalidate()
    for token in (anonymous, credentialed):
        answer = client.get(f"/v2/{public}/manifests/1.0.0", headers=_bearer(token))
        assert answer.status_code == 401
        assert f'scope="repository:{public}:pull"' in answer.headers["www-authenticate"]
    # Asked again, the credentials that may not read it are told so.
    again = client.get("/v2/token", params=scope, headers=other).json()["token"]
    answer = client.get(f"/v2/{public}/manifests/1.0.0", headers=_bearer(again))
    assert answer.status_code == 404


def test_an_oversized_token_form_is_413(registry: tuple[TestClient, Services]) -> None:
    client, _ = registry
    form = {"grant_type": "password", "password": "x" * 20_000}
    answer = client.post("/v2/token", data=form)
    assert answer.status_code == 413
    assert [e["code"] for e in answer.json()["errors"]] == ["UNSUPPORTED"]


def test_without_access_a_private_repository_is_indistinguishable_from_none(
    registry: tuple[TestClient, Services], secret_paths: list[str]
) -> None:
    """Every route, query and method answers a repository that exists exactly
    as one that does not, but for the name it echoes."""
    client, svc = registry
    other = make_token(svc, "read", ["open"])
    pull_other = client.get(
        "/v2/token",
        params={
            "scope": [f"repository:{SECRET_MODULE}:pull", "repository:modules/secret/nope/aws:pull"]
        },
        headers=_basic(other),
    ).json()["token"]
    queries = ["", "?n=1", "?n=1&last=1.0.0", "?last=9.9.9", "?last=zzz", "?n=0"]
    suffixes = [f"/tags/list{q}" for q in queries]
    suffixes += [p.split(SECRET_MODULE, 1)[1] for p in secret_paths if SECRET_MODULE in p]
    suffixes += ["/manifests/9.9.9", f"/blobs/sha256:{'1' * 64}", f"/referrers/sha256:{'1' * 64}"]
    for headers in ({}, _bearer(other), _basic(other), _bearer(pull_other)):
        for suffix in suffixes:
            for method in ("GET", "HEAD"):
                there = client.request(method, f"/v2/{SECRET_MODULE}{suffix}", headers=headers)
                gone = client.request(
                    method, f"/v2/modules/secret/nope/aws{suffix}", headers=headers
                )
                assert there.status_code in (401, 404), (suffix, there.status_code)
                assert there.status_code == gone.status_code, (headers, suffix)
                assert sorted(there.headers) == sorted(gone.headers), (headers, suffix)
                assert there.content.replace(b"vpc", b"nope") == gone.content, (headers, suffix)


def test_a_private_digest_asked_through_a_public_repository_is_unknown(
    registry: tuple[TestClient, Services], secret_paths: list[str]
) -> None:
    client, svc = registry
    token = _bearer(make_token(svc, "read", ["secret"]))
    # Config blobs ({} and {"architecture", "os"}) are the same in every
    # repository: public wherever they are.
    configs = {
        client.get(p, headers=token).json()["config"]["digest"]
        for p in secret_paths
        if "/manifests/sha256:" in p and "config" in client.get(p, headers=token).json()
    }
    digests = {p.rsplit("/", 1)[1] for p in secret_paths if "/sha256:" in p} - configs
    assert len(digests) == 5  # module manifest and zip, provider index, manifest and zip
    unknown = f"sha256:{'1' * 64}"
    for public in ("/v2/modules/open/vpc/aws", "/v2/providers/open/null"):
        for route in ("manifests", "blobs", "referrers"):
            for method in ("GET", "HEAD"):
                baseline = client.request(method, f"{public}/{route}/{unknown}")
                for digest in digests:
                    answer = client.request(method, f"{public}/{route}/{digest}")
                    assert answer.status_code == baseline.status_code, (public, route, digest)
                    assert sorted(answer.headers) == sorted(baseline.headers)
                    assert answer.content.replace(digest.encode(), unknown.encode()) == (
                        baseline.content
                    )

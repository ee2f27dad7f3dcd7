"""login.v1 (`terraform login`) against a real `gitreg serve` over TLS and a
real OpenID Provider (tests/support/oidc_provider.py); this test plays
Terraform's part of the protocol by hand, to try what Terraform never sends.
tests/e2e/test_terraform_login.py runs the real `terraform login`.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from gitreg.services import build_services
from gitreg.settings import load_settings
from tests.support.login_query import authorize_params
from tests.support.oidc_browser import browse, sign_in
from tests.support.oidc_provider import RunningProvider, oidc_provider
from tests.support.server import RunningServer, cli, free_port, start_server

GRANTS = """
[[grants]]
group = "platform-team"
namespace = "platform"
scope = "publish"
"""
LOOPBACK = "http://127.0.0.1:10003/login"


@dataclass
class Registry:
    server: RunningServer
    idp: RunningProvider

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.server.url, verify=self.server.ssl_context())


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    root = tmp_path_factory.mktemp("login")
    config = root / "gitreg.toml"
    config.write_text(GRANTS)
    port = free_port()
    with oidc_provider(f"https://127.0.0.1:{port}/oauth/callback") as idp:
        data = root / "data"
        cli(data, "namespace", "set", "platform", "--private")
        # The client secret by reference, as an operator would keep it.
        secret_file = root / "oidc-secret"
        secret_file.write_text(idp.client_secret + "\n")
        env = {**idp.gitreg_env(), "GITREG_OIDC_CLIENT_SECRET": f"file:{secret_file}"}
        server = start_server(data, "--config", str(config), port=port, env=env)
        try:
            yield Registry(server, idp)
        finally:
            server.stop()


def _authorize_params(verifier: str, **overrides: str) -> dict[str, str]:
    params = authorize_params(LOOPBACK, "tf-state-1", verifier)
    params.update(overrides)
    return {k: v for k, v in params.items() if v != "-"}


def _code(registry: Registry, verifier: str, login: str = "alice", **overrides: str) -> str:
    """Sign in as `login` in the browser; the loopback URL Terraform would receive."""
    query = urlencode(_authorize_params(verifier, **overrides))
    url = f"{registry.server.url}/oauth/authorization?{query}"
    return sign_in(url, login, registry.server.ca_pem)


def _query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def _token(registry: Registry, **form: str) -> httpx.Response:
    with registry.client() as client:
        return client.post("/oauth/token", data=form)


def _exchange(code: str, verifier: str, redirect_uri: str = LOOPBACK) -> dict[str, str]:
    return {
        "grant_type": "authorization_code",
        "client_id": "terraform-cli",
        "code": code,
        "redirect_uri": redirect_uri,
        "code_verifier": verifier,
    }


def test_discovery_offers_login_v1(registry: Registry) -> None:
    with registry.client() as client:
        services = client.get("/.well-known/terraform.json").json()
    assert services["login.v1"] == {
        "client": "terraform-cli",
        "grant_types": ["authz_code"],
        "authz": "/oauth/authorization",
        "token": "/oauth/token",
        "ports": [10000, 10010],
    }
    assert services["modules.v1"] == "/v1/modules/"


BAD_REDIRECTS = [
    "https://127.0.0.1:10000/login",
    "http://example.com:10000/login",
    "http://localhost.example.com:10000/login",
    "http://127.0.0.2:10000/login",
    "http://[::1]:10000/login",
    "http://0x7f000001:10000/login",
    "http://127.1:10000/login",
    "http://127.0.0.1:10000/other",
    "http://127.0.0.1:10000/login/",
    "http://127.0.0.1:10000/login?x=1",
    "http://127.0.0.1:10000/login#frag",
    "http://127.0.0.1:9999/login",
    "http://127.0.0.1:10011/login",
    "http://127.0.0.1:010000/login",
    "http://127.0.0.1/login",
    "http://127.0.0.1:10000",
    "http://user@127.0.0.1:10000/login",
    "http://evil.com@127.0.0.1:10000/login",
    "http://127.0.0.1:10000@evil.com/login",
    "http://127.0.0.1:10000%2F@evil.com/login",
    "http://127.0.0.1%3A10000/login",
    "http://localhost.:10000/login",
    "http://LOCALHOST:10000/login",
    "http://127.0.0.1:10000/%6Cogin",
    "http://127.0.0.1:10000/login\n",
    "http://127.0.0.1:10000\\@evil.com/login",
    "//127.0.0.1:10000/login",
    "javascript:alert(1)",
    "",
]


@pytest.mark.parametrize("redirect_uri", BAD_REDIRECTS)
def test_a_redirect_uri_outside_the_loopback_form_is_never_redirected_to(
    registry: Registry, redirect_uri: str
) -> None:
    params = _authorize_params("v" * 43, redirect_uri=redirect_uri or "-")
    with registry.client() as client:
        answer = client.get("/oauth/authorization", params=params)
    assert answer.status_code == 400
    assert "location" not in answer.headers
    assert "redirect_uri must be http://localhost:PORT/login" in answer.json()["errors"][0]


def test_a_repeated_redirect_uri_is_refused(registry: Registry) -> None:
    query = urlencode(_authorize_params("v" * 43)) + "&redirect_uri=http://evil.example/login"
    with registry.client() as client:
        answer = client.get(f"/oauth/authorization?{query}")
    assert answer.status_code == 400
    assert "location" not in answer.headers


def test_an_unknown_client_is_an_error_page(registry: Registry) -> None:
    with registry.client() as client:
        answer = client.get(
            "/oauth/authorization", params=_authorize_params("v" * 43, client_id="x")
        )
    assert answer.status_code == 400
    assert "location" not in answer.headers


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge_method": "-"}, "invalid_request"),
        ({"code_challenge": "-"}, "invalid_request"),
        ({"code_challenge": "short"}, "invalid_request"),
        ({"state": "-"}, "invalid_request"),
    ],
)
def test_other_errors_go_back_to_the_trusted_loopback_uri(
    registry: Registry, overrides: dict[str, str], error: str
) -> None:
    with registry.client() as client:
        answer = client.get("/oauth/authorization", params=_authorize_params("v" * 43, **overrides))
    assert answer.status_code == 302
    location = answer.headers["location"]
    assert location.startswith(LOOPBACK + "?")
    assert _query(location)["error"] == error
    assert "code" not in _query(location)


def test_alice_signs_in_and_gets_a_token_for_her_groups(registry: Registry) -> None:
    verifier = secrets.token_urlsafe(40)
    back = _code(registry, verifier)
    assert back.startswith(LOOPBACK + "?")
    answer = _query(back)
    assert answer["state"] == "tf-state-1"
    issued = _token(registry, **_exchange(answer["code"], verifier))
    assert issued.status_code == 200, issued.text
    assert issued.headers["cache-control"] == "no-store"
    body = issued.json()
    assert body["token_type"] == "bearer"
    token = body["access_token"]
    assert token.startswith("gitreg_")
    # The private namespace now answers her (404: no such module), not 401.
    path = "/v1/modules/platform/vpc/aws/versions"
    with registry.client() as client:
        assert client.get(path).status_code == 401
        assert client.get(path, headers={"Authorization": f"Bearer {token}"}).status_code == 404
    svc = build_services(load_settings({"data_dir": registry.server.data_dir}))
    try:
        [record] = [t for t in svc.auth.tokens() if t.prefix == token[:12]]
    finally:
        svc.close()
    assert record.grants == {"platform": "publish"}
    assert (record.subject, record.email, record.groups) == (
        "alice",
        "alice@example.com",
        ("platform-team",),
    )
    assert record.expires_at is not None and record.expires_at > time.time() + 29 * 86400
    [listed] = [
        t
        for t in json.loads(cli(registry.server.data_dir, "token", "list", "--json").stdout)
        if t["prefix"] == token[:12]
    ]
    assert (listed["owner"], listed["grants"]) == ("alice@example.com", {"platform": "publish"})
    # The sign-in is one audit row naming her and the token it made.
    audit = cli(registry.server.data_dir, "audit", "--json", "--action", "sign_in.terraform_login")
    [row] = [r for r in json.loads(audit.stdout) if r["object"] == f"token {token[:12]}"]
    assert row["actor"] == {"kind": "person", "name": "alice@example.com", "rule": ""}
    assert row["result"] == "ok" and row["client"] == "127.0.0.1"


def test_a_code_is_single_use(registry: Registry) -> None:
    verifier = secrets.token_urlsafe(40)
    code = _query(_code(registry, verifier))["code"]
    assert _token(registry, **_exchange(code, verifier)).status_code == 200
    again = _token(registry, **_exchange(code, verifier))
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"


def test_a_wrong_pkce_verifier_is_refused_and_spends_the_code(registry: Registry) -> None:
    verifier = secrets.token_urlsafe(40)
    code = _query(_code(registry, verifier))["code"]
    wrong = _token(registry, **_exchange(code, secrets.token_urlsafe(40)))
    assert (wrong.status_code, wrong.json()["error"]) == (400, "invalid_grant")
    right = _token(registry, **_exchange(code, verifier))
    assert right.json()["error"] == "invalid_grant"


def test_the_redirect_uri_must_be_the_one_authorized(registry: Registry) -> None:
    verifier = secrets.token_urlsafe(40)
    code = _query(_code(registry, verifier))["code"]
    other = _token(registry, **_exchange(code, verifier, "http://127.0.0.1:10004/login"))
    assert (other.status_code, other.json()["error"]) == (400, "invalid_grant")


def test_an_expired_code_is_refused(registry: Registry) -> None:
    verifier = secrets.token_urlsafe(40)
    code = _query(_code(registry, verifier))["code"]
    # Age the code in the shared index as 60 s would: same key, expiry in the past.
    svc = build_services(load_settings({"data_dir": registry.server.data_dir}))
    try:
        key = "code:" + hashlib.sha256(code.encode()).hexdigest()
        payload = svc.auth.take_login_state(key, time.time())
        assert payload is not None
        svc.auth.put_login_state(key, payload, expires_at=time.time() - 1, now=time.time() - 61)
    finally:
        svc.close()
    expired = _token(registry, **_exchange(code, verifier))
    assert (expired.status_code, expired.json()["error"]) == (400, "invalid_grant")


def test_the_client_id_may_come_as_basic_credentials(registry: Registry) -> None:
    verifier = secrets.token_urlsafe(40)
    code = _query(_code(registry, verifier))["code"]
    form = _exchange(code, verifier)
    del form["client_id"]
    with registry.client() as client:
        answer = client.post("/oauth/token", data=form, auth=("terraform-cli", ""))
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    ("form", "error", "status"),
    [
        ({"grant_type": "password"}, "unsupported_grant_type", 400),
        (  # no [[workload_identity]] here
            {
                "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                "subject_token": "eyJh.b.c",
                "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
            },
            "unsupported_grant_type",
            400,
        ),
        ({"grant_type": "authorization_code", "client_id": "x"}, "invalid_client", 401),
        ({"grant_type": "authorization_code", "client_id": "terraform-cli"}, "invalid_grant", 400),
    ],
)
def test_token_errors_are_rfc6749_json(
    registry: Registry, form: dict[str, str], error: str, status: int
) -> None:
    answer = _token(registry, **form)
    assert answer.status_code == status
    assert answer.json()["error"] == error


def test_bob_outside_every_granted_group_is_refused_with_a_page(registry: Registry) -> None:
    query = urlencode(_authorize_params(secrets.token_urlsafe(40)))
    url = f"{registry.server.url}/oauth/authorization?{query}"
    page = browse(url, "bob", registry.server.ca_pem)
    assert urlsplit(page.url).path == "/oauth/callback"
    assert page.status == 403
    assert "bob@example.com has no access to this registry" in page.text
    assert "(other)" in page.text  # the groups the IdP sent, to ask the operator about
    # The RFC 6749 4.1.2.1 answer is offered as a link, never followed on its own.
    [link] = re.findall(r'href="([^"]+)"', page.text)
    answer = _query(html.unescape(link))
    assert html.unescape(link).startswith(LOOPBACK + "?")
    assert (answer["error"], answer["state"]) == ("access_denied", "tf-state-1")
    assert "code" not in answer


def test_a_callback_without_a_pending_sign_in_is_an_error_page(registry: Registry) -> None:
    with registry.client() as client:
        answer = client.get("/oauth/callback", params={"state": "forged", "code": "x"})
    assert answer.status_code == 400
    assert "location" not in answer.headers


def test_the_client_secret_is_never_logged(registry: Registry) -> None:
    _code(registry, secrets.token_urlsafe(40))  # at least one exchange used it
    assert registry.idp.client_secret not in registry.server.log()


def test_refused_codes_count_as_failed_authentications(tmp_path: Path) -> None:
    # The token endpoint never calls the issuer, so none needs to listen here.
    env = {
        "GITREG_OIDC_ISSUER": "http://127.0.0.1:9",
        "GITREG_OIDC_CLIENT_ID": "gitreg",
        "GITREG_AUTH_FAIL_LIMIT": "2",
    }
    server = start_server(tmp_path / "data", env=env)
    try:
        with httpx.Client(base_url=server.url, verify=server.ssl_context()) as client:
            form = _exchange("guessed", secrets.token_urlsafe(40))
            statuses = [client.post("/oauth/token", data=form).status_code for _ in range(3)]
            assert statuses == [400, 400, 429]
            assert client.post("/oauth/token", data=form).headers["retry-after"].isdigit()
    finally:
        server.stop()


@pytest.mark.slow
def test_without_an_issuer_there_is_no_login(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data")
    try:
        with httpx.Client(base_url=server.url, verify=server.ssl_context()) as client:
            assert "login.v1" not in client.get("/.well-known/terraform.json").json()
            assert client.get("/oauth/authorization").status_code == 404
            assert client.post("/oauth/token").status_code == 404
    finally:
        server.stop()

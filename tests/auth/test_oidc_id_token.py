"""id_token validation (gitreg/auth/oidc.py; OpenID Connect Core 3.1.3.7).

The issuer here is a tiny HTTP server on 127.0.0.1 serving a discovery
document and a JWKS; tokens are signed with joserfc. The full sign-in against
a real OpenID Provider is tests/api/test_terraform_login.py.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey

from gitreg.auth import oidc
from gitreg.auth.oidc import IdTokenInvalid, OidcClient
from gitreg.errors import UpstreamError
from gitreg.settings import Settings
from tests.support.oidc_provider import count_fetches
from tests.support.server import free_port

CLIENT = "gitreg-test"


@dataclass
class Issuer:
    url: str
    keys: list[RSAKey]
    jwks_fetches: int = 0
    token_bytes_sent: int = 0  # of the endless answer its token endpoint gives
    algorithms: list[str] = field(default_factory=lambda: ["RS256", "HS256", "none"])

    def sign(self, key: RSAKey, **overrides: Any) -> str:
        now = int(time.time())
        claims = {
            "iss": self.url,
            "aud": CLIENT,
            "sub": "alice",
            "email": "alice@example.com",
            "groups": ["platform-team"],
            "nonce": "n-1",
            "iat": now,
            "exp": now + 300,
            **overrides,
        }
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    state = Issuer("", [RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig"})])

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/.well-known/openid-configuration":
                body: dict[str, Any] = {
                    "issuer": state.url,
                    "authorization_endpoint": state.url + "/auth",
                    "token_endpoint": state.url + "/token",
                    "jwks_uri": state.url + "/jwks",
                    "id_token_signing_alg_values_supported": state.algorithms,
                }
            elif self.path == "/jwks":
                state.jwks_fetches += 1
                body = {"keys": [k.as_dict(private=False) for k in state.keys]}
            else:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            """An endless token answer, up to 64 MiB: how much of it a client
            takes before hanging up is what the size cap is for."""
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            chunk = b"x" * 65536
            try:
                self.wfile.write(b'{"id_token": "')
                while state.token_bytes_sent < 64 * 1024 * 1024:
                    self.wfile.write(chunk)
                    state.token_bytes_sent += len(chunk)
            except OSError:
                pass  # the client hung up

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def _client(issuer: Issuer, claim: str = "groups") -> OidcClient:
    return OidcClient(
        Settings(oidc_issuer=issuer.url, oidc_client_id=CLIENT, oidc_groups_claim=claim)
    )


def _validate(client: OidcClient, token: str, nonce: str = "n-1") -> Any:
    return asyncio.run(client.validate(token, nonce))


def _unsigned(claims: dict[str, Any], alg: str = "none") -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': alg, 'typ': 'JWT'})}.{part(claims)}."


def test_a_valid_id_token_names_the_person_and_groups(issuer: Issuer) -> None:
    who = _validate(_client(issuer), issuer.sign(issuer.keys[0]))
    assert (who.subject, who.email, who.groups) == (
        "alice",
        "alice@example.com",
        ("platform-team",),
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"aud": "someone-else"},
        {"aud": [CLIENT, "someone-else"]},  # several audiences and no azp naming gitreg
        {"iss": "https://evil.example"},
        {"exp": int(time.time()) - 3600},
        {"nonce": "n-2"},
        {"nonce": None},
        {"sub": None},
        {"exp": None},
    ],
    ids=["aud", "aud-list-no-azp", "iss", "expired", "nonce", "no-nonce", "no-sub", "no-exp"],
)
def test_claims_that_do_not_fit_are_refused(issuer: Issuer, overrides: dict[str, Any]) -> None:
    with pytest.raises(IdTokenInvalid):
        _validate(_client(issuer), issuer.sign(issuer.keys[0], **overrides))


def test_several_audiences_pass_with_azp_naming_gitreg(issuer: Issuer) -> None:
    token = issuer.sign(issuer.keys[0], aud=[CLIENT, "other"], azp=CLIENT)
    assert _validate(_client(issuer), token).subject == "alice"


def test_expiry_has_a_small_leeway_only(issuer: Issuer) -> None:
    token = issuer.sign(issuer.keys[0], exp=int(time.time()) - 5)
    assert _validate(_client(issuer), token).subject == "alice"


def test_alg_none_is_refused_even_when_advertised(issuer: Issuer) -> None:
    now = int(time.time())
    claims = {"iss": issuer.url, "aud": CLIENT, "sub": "x", "nonce": "n-1", "exp": now + 60}
    with pytest.raises(IdTokenInvalid, match="algorithm 'none'"):
        _validate(_client(issuer), _unsigned(claims))


def test_hs256_made_with_the_public_key_is_refused(issuer: Issuer) -> None:
    now = int(time.time())
    claims = {"iss": issuer.url, "aud": CLIENT, "sub": "x", "nonce": "n-1", "exp": now + 60}
    # joserfc refuses to make this token, so it is put together by hand: the
    # classic confusion attack, HMAC keyed with the issuer's public PEM.
    public_pem = issuer.keys[0].as_pem(private=False)
    unsigned = _unsigned(claims, alg="HS256").rstrip(".")
    mac = hmac.new(public_pem, unsigned.encode(), hashlib.sha256).digest()
    forged = unsigned + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
    with pytest.raises(IdTokenInvalid, match="algorithm 'HS256'"):
        _validate(_client(issuer), forged)


def test_a_bad_signature_is_refused(issuer: Issuer) -> None:
    impostor = RSAKey.generate_key(2048, parameters={"kid": "k1"})  # same kid, other key
    with pytest.raises(IdTokenInvalid):
        _validate(_client(issuer), issuer.sign(impostor))


def test_an_unknown_kid_refetches_the_jwks_at_most_once_a_minute(issuer: Issuer) -> None:
    client = _client(issuer)
    assert _validate(client, issuer.sign(issuer.keys[0])).subject == "alice"
    assert issuer.jwks_fetches == 1
    stranger = RSAKey.generate_key(2048, parameters={"kid": "k-unknown"})
    for _ in range(3):
        with pytest.raises(IdTokenInvalid):
            _validate(client, issuer.sign(stranger))
    assert issuer.jwks_fetches == 1  # refused from the cache: the refresh is rate-limited


def test_a_rotated_key_is_learned_from_the_jwks(
    issuer: Issuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(oidc, "JWKS_REFRESH_INTERVAL", 0.0)
    client = _client(issuer)
    assert _validate(client, issuer.sign(issuer.keys[0])).subject == "alice"
    rotated = RSAKey.generate_key(2048, parameters={"kid": "k2", "use": "sig"})
    issuer.keys = [rotated]
    assert _validate(client, issuer.sign(rotated)).subject == "alice"
    assert issuer.jwks_fetches == 2


@pytest.mark.parametrize("value", ["platform-team", [1, "a"], {"a": 1}, None])
def test_a_groups_claim_that_is_not_a_list_of_strings_is_no_groups(
    issuer: Issuer, value: object
) -> None:
    token = issuer.sign(issuer.keys[0], groups=value)
    assert _validate(_client(issuer), token).groups == ()


def test_the_groups_claim_name_is_configurable(issuer: Issuer) -> None:
    token = issuer.sign(issuer.keys[0], roles=["admins"])
    assert _validate(_client(issuer, claim="roles"), token).groups == ("admins",)


def test_a_discovery_document_for_another_issuer_is_refused(issuer: Issuer) -> None:
    client = OidcClient(Settings(oidc_issuer=issuer.url + "/other", oidc_client_id=CLIENT))
    with pytest.raises(Exception, match="identity provider"):
        _validate(client, issuer.sign(issuer.keys[0]))


def test_a_server_without_sign_in_never_loads_joserfc() -> None:
    """joserfc's memory (docs/performance.md, "Memory of one worker") is paid only
    by a process that signs someone in."""
    probe = (
        "import sys, gitreg.app, gitreg.auth.http, gitreg.auth.oidc, gitreg.auth.login\n"
        "print(sorted(m for m in sys.modules if m.startswith('joserfc')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"


def test_the_client_secret_is_read_off_the_event_loop(
    issuer: Issuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`file:` secrets are read at each sign-in: a file read, so in a worker thread."""
    readers: list[int] = []

    def resolve(reference: str) -> str:
        readers.append(threading.get_ident())
        return "s3cret"

    monkeypatch.setattr(oidc, "resolve_secret", resolve)
    settings = Settings(
        oidc_issuer=issuer.url, oidc_client_id=CLIENT, oidc_client_secret="file:/run/secret"
    )
    with pytest.raises(UpstreamError):  # the test issuer's token answer never ends
        asyncio.run(OidcClient(settings).exchange("code", "https://r/cb", "v" * 43))
    assert readers and threading.get_ident() not in readers


def test_a_token_answer_is_read_only_up_to_its_cap(issuer: Issuer) -> None:
    """The token endpoint's answer goes through the same 1 MiB cap as the
    discovery document and the JWKS: the client hangs up instead of reading it whole."""
    with pytest.raises(UpstreamError, match="larger than 1 MiB"):
        asyncio.run(_client(issuer).exchange("code", "https://r/cb", "v" * 43))
    assert issuer.token_bytes_sent < 16 * 1024 * 1024


def test_an_unreachable_issuer_is_asked_once_per_retry_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every visitor of the sign-in page while the issuer is down would otherwise
    wait out the timeout and send it one more request."""
    fetched = count_fetches(monkeypatch)
    client = OidcClient(Settings(oidc_issuer=f"http://127.0.0.1:{free_port()}", oidc_client_id="c"))
    for _ in range(3):
        with pytest.raises(UpstreamError, match="cannot fetch the discovery document"):
            asyncio.run(client.metadata())
    assert len(fetched) == 1
    monkeypatch.setattr(oidc, "DISCOVERY_RETRY", 0.0)  # the interval is over
    with pytest.raises(UpstreamError):
        asyncio.run(client.metadata())
    assert len(fetched) == 2


def test_concurrent_cold_requests_fetch_discovery_once(
    issuer: Issuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sign-in pages opened together on a fresh server share one discovery
    fetch instead of each sending the issuer its own."""
    fetched = count_fetches(monkeypatch, delay=0.05)
    client = _client(issuer)

    async def together() -> list[Any]:
        return await asyncio.gather(*(client.metadata() for _ in range(8)))

    answers = asyncio.run(together())
    assert len(fetched) == 1
    assert {a.token_endpoint for a in answers} == {issuer.url + "/token"}

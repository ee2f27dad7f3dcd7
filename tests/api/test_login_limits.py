"""What anonymous visitors of `/oauth/authorization` can write (docs/sign-in.md,
"Limits"): each visit keeps a pending sign-in in the index before anything is
known about the visitor, so a real `gitreg serve` over TLS bounds them per
client address (the address the access log shows: the forwarded one only with
`trust_forwarded`) and in all, answering the route's JSON errors with a 503
and Retry-After. The real `terraform login` is tests/e2e/test_e2e_terraform_login.py.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from gitreg.services import build_services
from gitreg.settings import load_settings
from tests.support.login_query import authorize_params
from tests.support.oidc_provider import RunningProvider, oidc_provider
from tests.support.server import RunningServer, free_port, start_server

PER_CLIENT = 3
PENDING_MAX = 5

Start = Callable[..., RunningServer]


@pytest.fixture(scope="module")
def idp() -> Iterator[RunningProvider]:
    # Only the issuer's discovery document is read before the limits apply:
    # the redirect URI registered here is never used by these tests.
    with oidc_provider(f"https://127.0.0.1:{free_port()}/oauth/callback") as running:
        yield running


@pytest.fixture
def start(tmp_path: Path, idp: RunningProvider) -> Iterator[Start]:
    servers: list[RunningServer] = []

    def make(*args: str) -> RunningServer:
        env = {
            **idp.gitreg_env(),
            "GITREG_SIGN_IN_PER_CLIENT": str(PER_CLIENT),
            "GITREG_SIGN_IN_PENDING_MAX": str(PENDING_MAX),
        }
        servers.append(start_server(tmp_path / f"data-{len(servers)}", *args, env=env))
        return servers[-1]

    yield make
    for server in servers:
        server.stop()


def _authorize(server: RunningServer, address: str) -> httpx.Response:
    params = authorize_params(
        "http://127.0.0.1:10003/login", secrets.token_urlsafe(8), secrets.token_urlsafe(40)
    )
    with httpx.Client(base_url=server.url, verify=server.ssl_context()) as client:
        return client.get(
            "/oauth/authorization", params=params, headers={"X-Forwarded-For": address}
        )


def _pending(server: RunningServer) -> int:
    svc = build_services(load_settings({"data_dir": server.data_dir}))
    try:
        return svc.auth.count_login_states(time.time(), 1000)
    finally:
        svc.close()


def _busy(answer: httpx.Response, message: str) -> int:
    """The Retry-After of a 503 in the route's JSON error format."""
    assert answer.status_code == 503, answer.text
    assert answer.json() == {"errors": [message]}
    assert answer.headers["cache-control"] == "no-store"
    return int(answer.headers["retry-after"])


@pytest.mark.slow
def test_one_address_gets_its_allowance_and_another_still_gets_through(start: Start) -> None:
    server = start("--trust-forwarded")
    for _ in range(PER_CLIENT):
        assert _authorize(server, "10.0.0.1").status_code == 302
    wait = _busy(
        _authorize(server, "10.0.0.1"),
        "too many sign-ins started from your address; try again later",
    )
    assert 0 < wait <= 600  # when its oldest sign-in leaves the window
    assert _authorize(server, "10.0.0.2").status_code == 302
    assert _pending(server) == PER_CLIENT + 1  # the refused request wrote nothing


def test_a_forwarded_address_is_not_believed_without_trust_forwarded(start: Start) -> None:
    """Otherwise a script would make up a new address for each request."""
    server = start()
    for n in range(PER_CLIENT):
        assert _authorize(server, f"10.0.1.{n}").status_code == 302
    assert _authorize(server, "10.0.1.99").status_code == 503
    assert _pending(server) == PER_CLIENT


def test_the_index_holds_at_most_pending_max_sign_ins_and_expiry_frees_room(
    start: Start,
) -> None:
    server = start("--trust-forwarded")
    states = []
    for n in range(PENDING_MAX):
        answer = _authorize(server, f"10.0.2.{n}")
        assert answer.status_code == 302
        states.append(parse_qs(urlsplit(answer.headers["location"]).query)["state"][0])
    message = "too many sign-ins in progress; try again in a minute"
    assert _busy(_authorize(server, "10.0.2.99"), message) == 60
    assert _pending(server) == PENDING_MAX
    # Age two of them in the shared index as 10 minutes would: their room is free.
    svc = build_services(load_settings({"data_dir": server.data_dir}))
    try:
        for state in states[:2]:
            key = "login:" + hashlib.sha256(state.encode()).hexdigest()
            payload = svc.auth.take_login_state(key, time.time())
            assert payload is not None
            svc.auth.put_login_state(key, payload, time.time() - 1, time.time() - 601)
    finally:
        svc.close()
    assert _authorize(server, "10.0.2.99").status_code == 302
    assert _authorize(server, "10.0.2.98").status_code == 302
    assert _authorize(server, "10.0.2.97").status_code == 503

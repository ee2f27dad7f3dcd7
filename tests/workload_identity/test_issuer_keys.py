"""`IssuerKeys` (gitreg/workload_identity/issuer.py) on a clock of its own and an
issuer that goes away: keys older than KEYS_TTL are never used, failure or not;
an outage is one log line, and its recovery another; an issuer that accepts
but does not answer is a 503 within FETCH_BUDGET."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gitreg.errors import IssuerUnavailable, UpstreamError
from gitreg.server.tls import ensure_local_tls
from gitreg.workload_identity.issuer import FAILURE_BACKOFF, FETCH_BUDGET, KEYS_TTL, IssuerKeys
from tests.support.server import free_port
from tests.support.threaded_server import ThreadedServer
from tests.support.workload_issuer import new_key

ISSUER = "https://issuer.example.com"


class _Issuer:
    """What UpstreamHttp.json answers for one issuer, until it goes down."""

    def __init__(self) -> None:
        self.down = False
        self.key: dict[str, Any] = dict(new_key("k1").as_dict(private=False))
        self.others: list[dict[str, Any]] = []

    async def json(self, url: str, what: str) -> tuple[dict[str, Any], object]:
        if self.down:
            raise UpstreamError(f"{what}: connection refused")
        if url.endswith("/.well-known/openid-configuration"):
            return {"issuer": ISSUER, "jwks_uri": ISSUER + "/jwks"}, None
        return {"keys": [*self.others, self.key]}, None


def test_keys_past_their_life_are_not_used_while_the_issuer_is_down() -> None:
    now = [1000.0]
    upstream = _Issuer()
    keys = IssuerKeys(ISSUER, http=upstream, clock=lambda: now[0])  # type: ignore[arg-type]

    def known() -> bool:
        return asyncio.run(keys.keys_for("k1"))[2]

    assert known()
    upstream.down = True
    now[0] += KEYS_TTL - 1
    assert known()  # fresh: no fetch at all
    now[0] += 2  # past their life, and the issuer cannot say whether they still hold
    with pytest.raises(IssuerUnavailable):
        known()
    for _ in range(3):  # during the backoff: refused without a fetch, never the old keys
        now[0] += FAILURE_BACKOFF / 4
        with pytest.raises(IssuerUnavailable):
            known()
    upstream.down = False
    now[0] += FAILURE_BACKOFF
    assert known()


UNREADABLE: list[dict[str, Any]] = [
    {"kty": "RSA", "kid": "no-modulus", "e": "AQAB"},
    {"kty": "EC", "kid": "unknown-curve", "crv": "P-999", "x": "AA", "y": "AA"},
    {"kty": "OKP", "kid": "short", "crv": "Ed25519", "x": "AAAA"},
    {"kty": "future", "kid": "unknown-type"},
]


def test_keys_gitreg_cannot_read_leave_the_others_usable() -> None:
    upstream = _Issuer()
    upstream.others = UNREADABLE
    keys = IssuerKeys(ISSUER, http=upstream)  # type: ignore[arg-type]
    _, found, known = asyncio.run(keys.keys_for("k1"))
    assert known
    assert [k.kid for k in found] == ["k1"]


def test_a_jwks_of_only_unreadable_keys_is_503() -> None:
    upstream = _Issuer()
    upstream.others = UNREADABLE
    upstream.key = UNREADABLE[0]
    keys = IssuerKeys(ISSUER, http=upstream)  # type: ignore[arg-type]
    with pytest.raises(IssuerUnavailable, match="no signing key"):
        asyncio.run(keys.keys_for("k1"))


def test_an_outage_is_one_warning_and_its_end_one_info_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [1000.0]
    upstream = _Issuer()
    keys = IssuerKeys(ISSUER, http=upstream, clock=lambda: now[0])  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, "gitreg.workload_identity")

    def use() -> None:
        asyncio.run(keys.keys_for("k1"))

    upstream.down = True
    for _ in range(3):  # three backoffs, each ended by a fetch that fails again
        for _ in range(4):
            with pytest.raises(IssuerUnavailable):
                use()
            now[0] += FAILURE_BACKOFF / 3
    upstream.down = False
    for _ in range(3):
        use()
        now[0] += KEYS_TTL
    logged = [(r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("gitreg")]
    assert logged == [
        (
            "WARNING",
            f"workload identity issuer {ISSUER} cannot be used: the discovery document:"
            " connection refused; tokens it signed are refused with 503 until it answers",
        ),
        ("INFO", f"workload identity issuer {ISSUER} answers again"),
    ]


@pytest.fixture
def silent_issuer(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An https issuer whose discovery document takes 3 s and whose JWKS never
    comes: each request within a per-request timeout, the two together not."""
    tls = ensure_local_tls(tmp_path / "tls", ["127.0.0.1"])
    url = f"https://127.0.0.1:{free_port()}"
    released = threading.Event()

    async def answer(request: Request) -> Response:
        if request.url.path == "/.well-known/openid-configuration":
            await asyncio.sleep(3)
            return JSONResponse({"issuer": url, "jwks_uri": url + "/jwks"})
        while not released.is_set():
            await asyncio.sleep(0.05)
        return Response(status_code=404)

    port = int(url.rsplit(":", 1)[1])
    served = ThreadedServer(Starlette(routes=[Route("/{p:path}", answer)]), port, tls.cert, tls.key)
    served.start("the silent issuer")
    yield url, tls.ca_cert
    released.set()
    served.stop()


@pytest.mark.slow
def test_an_issuer_that_never_answers_is_503_before_terraform_gives_up(
    silent_issuer: tuple[str, Path],
) -> None:
    url, ca_file = silent_issuer
    assert FETCH_BUDGET < 10  # Terraform's registry client timeout

    async def first_use() -> tuple[float, int]:
        keys = IssuerKeys(url, ca_file=str(ca_file))
        ticks = 0

        async def tick() -> None:  # the event loop stays free meanwhile
            nonlocal ticks
            while True:
                await asyncio.sleep(0.1)
                ticks += 1

        ticker = asyncio.create_task(tick())
        started = time.monotonic()
        try:
            with pytest.raises(IssuerUnavailable, match="did not answer within"):
                await asyncio.wait_for(keys.keys_for("k1"), 20)
            return time.monotonic() - started, ticks
        finally:
            ticker.cancel()

    took, ticks = asyncio.run(first_use())
    assert FETCH_BUDGET - 0.5 < took < FETCH_BUDGET + 1.5
    assert ticks >= (FETCH_BUDGET - 1) * 10

"""`IssuerKeys` (gitreg/workload_identity/issuer.py) on a clock of its own and an
issuer that goes away: keys older than KEYS_TTL are never used, failure or not."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gitreg.errors import IssuerUnavailable, UpstreamError
from gitreg.workload_identity.issuer import FAILURE_BACKOFF, KEYS_TTL, IssuerKeys
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

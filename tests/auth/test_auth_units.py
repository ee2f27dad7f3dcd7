"""Tokens, scopes, signed URLs and the failed-auth limiter."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gitreg.auth.ratelimit import MAX_CLIENTS, FailureLimiter
from gitreg.auth.signed_urls import UrlSigner, rotate_signing_key
from gitreg.auth.tokens import Principal, Scope, looks_like_token, new_token, parse_duration
from gitreg.errors import BadRequest, Forbidden, TooManyRequests
from gitreg.storage.secrets import file_secret_store


def test_new_tokens_are_random_and_well_formed() -> None:
    first, second = new_token(), new_token()
    assert first != second
    assert looks_like_token(first) and looks_like_token(second)


@pytest.mark.parametrize(
    ("scope", "namespaces", "wanted", "namespace", "allowed"),
    [
        (Scope.read, {"acme"}, Scope.read, "ACME", True),
        (Scope.read, {"acme"}, Scope.read, "other", False),
        (Scope.read, {"acme"}, Scope.publish, "acme", False),
        (Scope.publish, {"acme"}, Scope.read, "acme", True),
        (Scope.admin, set(), Scope.publish, "anything", True),
        (Scope.admin, {"acme"}, Scope.admin, None, False),
        (Scope.admin, set(), Scope.admin, None, True),
    ],
)
def test_scopes_and_namespaces(
    scope: Scope, namespaces: set[str], wanted: Scope, namespace: str | None, allowed: bool
) -> None:
    principal = Principal(1, scope, frozenset(namespaces), None)
    assert principal.allows(wanted, namespace) is allowed


def test_expiry() -> None:
    assert Principal(1, Scope.read, frozenset(), time.time() - 1).expired()
    assert not Principal(1, Scope.read, frozenset(), None).expired()


@pytest.mark.parametrize(("text", "seconds"), [("90d", 90 * 86400), ("12h", 43200), ("5m", 300)])
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["90", "d", "-1d", "1y", "9999999d"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(BadRequest):
        parse_duration(text)


def _query(signed: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in signed.split("&"))


def test_signed_url_round_trip_and_key_file_mode(tmp_path: Path) -> None:
    signer = UrlSigner(file_secret_store(tmp_path), ttl=600)
    query = _query(signer.sign("/archives/abc.tar.gz"))
    signer.verify("/archives/abc.tar.gz", query)
    assert (tmp_path / "secrets" / "url-signing.keys").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("field", ["path", "expires", "signature"])
def test_tampered_signed_urls_are_forbidden(tmp_path: Path, field: str) -> None:
    signer = UrlSigner(file_secret_store(tmp_path), ttl=600)
    path = "/archives/abc.tar.gz"
    query = _query(signer.sign(path))
    if field == "path":
        path = "/archives/abd.tar.gz"
    elif field == "expires":
        query["expires"] = str(int(query["expires"]) + 60)
    else:
        query["signature"] = query["signature"][:-2] + "AA"
    with pytest.raises(Forbidden):
        signer.verify(path, query)


def test_expired_signed_url_is_forbidden(tmp_path: Path) -> None:
    signer = UrlSigner(file_secret_store(tmp_path), ttl=600)
    query = _query(signer.sign("/x", now=time.time() - 601))
    with pytest.raises(Forbidden, match="expired"):
        signer.verify("/x", query)


@pytest.mark.parametrize("query", [{}, {"expires": "abc", "signature": "x"}, {"expires": "1" * 20}])
def test_malformed_signature_params_are_forbidden(tmp_path: Path, query: dict[str, str]) -> None:
    with pytest.raises(Forbidden):
        UrlSigner(file_secret_store(tmp_path), ttl=600).verify("/x", query)


def test_rotation_keeps_previous_key_valid(tmp_path: Path) -> None:
    signer = UrlSigner(file_secret_store(tmp_path), ttl=600)
    old = _query(signer.sign("/x"))
    rotate_signing_key(file_secret_store(tmp_path))
    signer.reload_if_rotated()  # within a second of the last look: not read again yet
    signer.reload_if_rotated(now=time.monotonic() + 2)
    signer.verify("/x", old)
    rotate_signing_key(file_secret_store(tmp_path))
    signer.reload_if_rotated(now=time.monotonic() + 4)
    with pytest.raises(Forbidden):
        signer.verify("/x", old)


def test_limiter_blocks_after_limit_and_recovers() -> None:
    limiter = FailureLimiter(limit=3, window=10)
    for _ in range(3):
        limiter.check("1.2.3.4", now=100)
        limiter.failed("1.2.3.4", now=100)
    with pytest.raises(TooManyRequests) as caught:
        limiter.check("1.2.3.4", now=101)
    assert caught.value.retry_after == 9
    limiter.check("5.6.7.8", now=101)  # other clients are unaffected
    limiter.check("1.2.3.4", now=111)  # the window has passed


def test_limiter_flood_of_addresses_keeps_lockouts_and_stays_bounded() -> None:
    limiter = FailureLimiter(limit=3, window=60)
    for _ in range(3):
        limiter.failed("1.2.3.4", now=100)
    for i in range(MAX_CLIENTS + 50):
        limiter.failed(f"10.0.{i // 256}.{i % 256}", now=101)
    with pytest.raises(TooManyRequests):
        limiter.check("1.2.3.4", now=102)  # no fresh tries for the locked-out address
    assert len(limiter) <= MAX_CLIENTS


def test_limiter_evicts_expired_entries_before_live_ones() -> None:
    limiter = FailureLimiter(limit=3, window=10, max_clients=2)
    for _ in range(3):
        limiter.failed("was-locked", now=100)
    limiter.failed("live", now=109)
    limiter.failed("new", now=111)  # full: the aged-out lockout makes room, not "live"
    limiter.failed("live", now=111)
    limiter.failed("live", now=111)
    with pytest.raises(TooManyRequests):
        limiter.check("live", now=112)
    assert len(limiter) == 2

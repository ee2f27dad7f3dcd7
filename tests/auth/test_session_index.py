"""Contract: web UI sessions (AuthIndex.create_session/session/delete_session),
on SQLite and PostgreSQL: what one replica stores, every replica reads."""

from __future__ import annotations

from gitreg.auth.store import SessionRecord
from tests.support.backends import Backend


def _record(created: float = 1000.0, expires: float = 2000.0) -> SessionRecord:
    return SessionRecord(
        subject="alice",
        email="alice@example.com",
        groups=("platform-team", "ops"),
        grants={"platform": "publish", "*": "read"},
        csrf="c" * 43,
        created_at=created,
        expires_at=expires,
    )


def test_a_session_round_trips_until_it_expires(implementation: Backend) -> None:
    auth = implementation.auth
    auth.create_session("h1", _record())
    assert auth.session("h1", now=1999.0) == _record()
    assert auth.session("h1", now=2000.0) is None  # expired at expires_at
    assert auth.session("other", now=1500.0) is None


def test_deleting_a_session_ends_it_everywhere(implementation: Backend) -> None:
    auth = implementation.auth
    auth.create_session("h1", _record())
    auth.create_session("h2", _record())
    assert auth.delete_session("h1") is True
    assert auth.delete_session("h1") is False
    assert auth.session("h1", now=1500.0) is None
    assert auth.session("h2", now=1500.0) is not None


def test_creating_a_session_sweeps_expired_ones(implementation: Backend) -> None:
    auth = implementation.auth
    auth.create_session("old", _record(created=1000.0, expires=1500.0))
    auth.create_session("new", _record(created=3000.0, expires=4000.0))
    assert auth.delete_session("old") is False  # swept by the second create
    assert auth.session("new", now=3500.0) is not None

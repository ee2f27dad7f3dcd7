"""Contract: API tokens and namespace visibility (AuthIndex)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from gitreg.auth.store import Identity
from gitreg.errors import NotFound
from tests.support.backends import Backend


def test_a_token_round_trips_and_is_revoked_once(implementation: Backend) -> None:
    auth = implementation.auth
    token_id = auth.add_token("f" * 64, "grt_abcd", "read", ["acme"], "ci", None)
    (token,) = auth.tokens()
    assert (token.id, token.scope, token.namespaces) == (token_id, "read", ("acme",))
    auth.revoke(token_id)
    assert auth.tokens() == []
    assert [t.id for t in auth.tokens(include_revoked=True)] == [token_id]
    with pytest.raises(NotFound):
        auth.revoke(token_id)


def test_namespace_visibility_is_idempotent_and_ignores_case(implementation: Backend) -> None:
    auth = implementation.auth
    auth.set_namespace_private("Acme", True)
    auth.set_namespace_private("acme", True)
    assert auth.namespace_visibility() == {"acme": True}
    auth.set_namespace_private("ACME", False)
    assert auth.namespace_visibility() == {"acme": False}


def test_a_login_token_keeps_its_grants_and_whose_it_is(implementation: Backend) -> None:
    auth = implementation.auth
    who = Identity("sub-alice", "alice@example.com", ("platform-team", "sre"))
    grants = {"platform": "publish", "*": "read"}
    token_id = auth.add_login_token("a" * 64, "gitreg_abcde", grants, who, "login", 2e9)
    auth.add_token("b" * 64, "gitreg_fghij", "admin", [], "ci", None)
    login, operator = auth.tokens()
    assert (login.id, login.scope, login.grants) == (token_id, "publish", grants)
    assert (login.subject, login.email, login.groups) == (who.subject, who.email, who.groups)
    assert (login.namespaces, login.expires_at) == ((), 2e9)
    assert (operator.grants, operator.subject, operator.groups) == (None, "", ())
    auth.revoke(token_id)
    assert [t.id for t in auth.tokens()] == [operator.id]


def test_a_login_state_is_taken_once_and_not_after_it_expires(implementation: Backend) -> None:
    auth = implementation.auth
    auth.put_login_state("k1", '{"a": 1}', expires_at=1060.0, now=1000.0)
    auth.put_login_state("k2", "two", expires_at=1060.0, now=1000.0)
    assert auth.take_login_state("k1", now=1059.0) == '{"a": 1}'
    assert auth.take_login_state("k1", now=1059.0) is None  # single use
    assert auth.take_login_state("k2", now=1060.0) is None  # expired
    assert auth.take_login_state("k2", now=1000.0) is None  # and gone
    assert auth.take_login_state("never", now=1000.0) is None


def test_putting_a_login_state_sweeps_expired_ones(implementation: Backend) -> None:
    auth = implementation.auth
    auth.put_login_state("old", "x", expires_at=1010.0, now=1000.0)
    auth.put_login_state("new", "y", expires_at=2060.0, now=2000.0)
    # "old" was deleted by the second put, so even a clock set back finds nothing.
    assert auth.take_login_state("old", now=1000.0) is None
    assert auth.take_login_state("new", now=2000.0) == "y"


def test_a_login_state_is_taken_once_under_concurrency(implementation: Backend) -> None:
    auth = implementation.auth
    auth.put_login_state("race", "code", expires_at=5000.0, now=1000.0)
    with ThreadPoolExecutor(max_workers=8) as pool:
        taken = list(pool.map(lambda _: auth.take_login_state("race", now=1000.0), range(8)))
    assert taken.count("code") == 1
    assert taken.count(None) == 7


def test_unexpired_login_states_are_counted_up_to_a_limit(implementation: Backend) -> None:
    auth = implementation.auth
    assert auth.count_login_states(now=1000.0, limit=10) == 0
    for n in range(4):
        auth.put_login_state(f"k{n}", "x", expires_at=1060.0 + n, now=1000.0)
    assert auth.count_login_states(now=1000.0, limit=10) == 4
    assert auth.count_login_states(now=1000.0, limit=3) == 3  # bounded work
    assert auth.count_login_states(now=1061.0, limit=10) == 2  # expiry frees room
    auth.take_login_state("k3", now=1000.0)
    assert auth.count_login_states(now=1061.0, limit=10) == 1

"""Tokens and Namespaces (gitreg/auth/tokens.py, gitreg/auth/service.py): what
they refuse, and that a change reaches this process's access snapshot at once."""

from __future__ import annotations

import asyncio

import pytest

from gitreg.auth.store import SessionRecord
from gitreg.auth.tokens import Scope
from gitreg.errors import BadRequest, NotFound, TooManyRequests, Unauthorized
from gitreg.services import Services

CLIENT = "203.0.113.9"
ALICE = SessionRecord(
    subject="alice",
    email="alice@example.com",
    groups=("platform-team",),
    grants={"platform": "publish", "docs": "read"},
    csrf="c",
    created_at=0.0,
    expires_at=4e9,
)


def _holder_scope(svc: Services, secret: str) -> Scope:
    return asyncio.run(svc.access.check_token(secret, CLIENT)).scope


def _refused(svc: Services, secret: str) -> bool:
    try:
        asyncio.run(svc.access.check_token(secret, CLIENT))
    except Unauthorized:
        return True
    return False


@pytest.mark.parametrize(
    ("scope", "namespaces", "expires_in", "refusal"),
    [
        ("owner", [], "", "scope must be read, publish or admin"),
        ("read", ["not a name"], "", "invalid namespace"),
        ("read", ["acme"], "ninety days", "duration must look like"),
    ],
)
def test_an_operator_token_with_a_bad_part_is_refused_and_not_stored(
    svc: Services, scope: str, namespaces: list[str], expires_in: str, refusal: str
) -> None:
    with pytest.raises(BadRequest, match=refusal):
        svc.tokens.create(scope, namespaces, expires_in)
    assert svc.tokens.active() == []


def test_a_new_token_works_at_once_in_this_process(svc: Services) -> None:
    asyncio.run(svc.access.snapshot())  # cached before the token exists
    made = svc.tokens.create("publish", ["acme"], "12h", "ci")
    assert _holder_scope(svc, made.secret) == Scope.publish
    [record] = svc.tokens.active()
    assert (record.id, record.namespaces, record.description) == (made.id, ("acme",), "ci")
    assert record.expires_at is not None


def test_a_revoked_token_stops_at_once_and_cannot_be_revoked_again(svc: Services) -> None:
    made = svc.tokens.create("read")
    assert _holder_scope(svc, made.secret) == Scope.read
    svc.tokens.revoke(made.id)
    assert _refused(svc, made.secret)
    with pytest.raises(NotFound):
        svc.tokens.revoke(made.id)


def test_a_person_gets_a_token_within_their_grants(svc: Services) -> None:
    made = svc.tokens.create_own(ALICE, "  ci:   vpc ", 30, {"platform": "read", "docs": "none"})
    [record] = svc.tokens.owned_by("alice")
    assert (record.id, record.description, record.grants) == (
        made.id,
        "ci: vpc",
        {"platform": "read"},
    )
    assert (record.subject, record.email, record.groups) == ("alice", ALICE.email, ALICE.groups)
    assert _holder_scope(svc, made.secret) == Scope.read
    assert svc.tokens.owned_by("bob") == [] and svc.tokens.owned_by("") == []


@pytest.mark.parametrize(
    ("name", "days", "scopes", "refusal"),
    [
        ("", 30, {"platform": "read"}, "give the token a name"),
        ("x" * 101, 30, {"platform": "read"}, "give the token a name"),
        ("ci", 31, {"platform": "read"}, "choose one of the offered expiries"),
        ("ci", None, {"platform": "read"}, "choose one of the offered expiries"),
        ("ci", 30, {"secret": "read"}, "you have no grant on secret"),
        ("ci", 30, {"docs": "publish"}, "publish on docs is more than your groups grant you"),
        ("ci", 30, {"platform": "none", "docs": "none"}, "choose a scope for at least one"),
    ],
)
def test_a_person_is_refused_a_token_beyond_their_grants(
    svc: Services, name: str, days: int | None, scopes: dict[str, str], refusal: str
) -> None:
    with pytest.raises(BadRequest, match=refusal):
        svc.tokens.create_own(ALICE, name, days, scopes)
    assert svc.tokens.active() == []


def test_a_person_revokes_only_their_own_tokens(svc: Services) -> None:
    operator = svc.tokens.create("admin")
    own = svc.tokens.create_own(ALICE, "ci", 7, {"platform": "publish"})
    with pytest.raises(NotFound):
        svc.tokens.revoke_owned("alice", operator.id)
    with pytest.raises(NotFound):
        svc.tokens.revoke_owned("bob", own.id)
    assert {t.id for t in svc.tokens.active()} == {operator.id, own.id}
    svc.tokens.revoke_owned("alice", own.id)
    assert _refused(svc, own.secret) and not _refused(svc, operator.secret)


def test_a_namespace_made_private_is_private_at_once(svc: Services) -> None:
    assert not asyncio.run(svc.access.snapshot()).is_private("acme")
    svc.namespaces.set_private("Acme", True)
    assert asyncio.run(svc.access.snapshot()).is_private("acme")
    assert svc.namespaces.visibility() == {"acme": True}
    with pytest.raises(BadRequest, match="invalid namespace"):
        svc.namespaces.set_private("-acme", True)


def test_bad_tokens_presented_in_a_form_count_against_the_client(svc: Services) -> None:
    for _ in range(svc.settings.auth_fail_limit):
        assert _refused(svc, "gitreg_" + "x" * 43)
    made = svc.tokens.create("read")
    with pytest.raises(TooManyRequests):  # even a good one, until the window passes
        asyncio.run(svc.access.check_token(made.secret, CLIENT))
    other = asyncio.run(svc.access.check_token(made.secret, "198.51.100.1"))
    assert other.token_id == made.id  # another address is not limited

"""Contract: API tokens and namespace visibility (AuthIndex)."""

from __future__ import annotations

import pytest

from gitreg.errors import NotFound
from tests.storage.conftest import Backend


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

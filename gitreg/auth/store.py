"""What access and sign-in need from the index, and the records it hands out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class TokenRecord:
    id: int
    token_hash: str
    prefix: str
    scope: str
    namespaces: tuple[str, ...]
    description: str
    created_at: str
    expires_at: float | None
    revoked_at: str | None
    # Sign-in tokens only (migration 0019): who signed in, and the scope per
    # namespace ("*" for all) their groups gave; None for operator tokens.
    subject: str = ""
    email: str = ""
    groups: tuple[str, ...] = ()
    grants: dict[str, str] | None = None


@dataclass(frozen=True)
class Identity:
    """A person as their identity provider named them at sign-in."""

    subject: str
    email: str
    groups: tuple[str, ...]


@dataclass(frozen=True)
class AccessSignature:
    """Cheap to read, and different whenever the access snapshot could be:
    `credentials` covers tokens and namespace visibility, `blobs` the tables
    that say which namespaces own which blobs. Those rows are only ever
    added (a revoke sets `revoked_at`), so each table's row count and highest
    rowid move on every change that matters, from whichever process made it;
    the count would also catch a deletion, should one ever be added (versions
    and packages are never deleted: their highest key alone, see below)."""

    credentials: tuple[object, ...]
    blobs: tuple[object, ...]


@dataclass(frozen=True)
class SessionRecord:
    subject: str
    email: str
    groups: tuple[str, ...]
    grants: dict[str, str]  # lower-cased namespace or "*" -> read | publish | admin
    csrf: str  # the synchronizer token of this session's forms
    created_at: float
    expires_at: float


class AuthIndex(Protocol):
    """API tokens and namespace visibility."""

    def add_token(
        self,
        token_hash: str,
        prefix: str,
        scope: str,
        namespaces: list[str],
        description: str,
        expires_at: float | None,
    ) -> int:
        """Store a token (only its hash); its id."""
        ...

    def tokens(self, include_revoked: bool = False) -> list[TokenRecord]: ...

    def revoke(self, token_id: int) -> None:
        """Raises `NotFound` unless the token exists and is still active."""
        ...

    def set_namespace_private(self, namespace: str, private: bool) -> None:
        """Idempotent; namespaces compare without regard to case."""
        ...

    def namespace_visibility(self) -> dict[str, bool]:
        """Lower-cased namespace -> private, for namespaces set explicitly."""
        ...

    def access_signature(self) -> AccessSignature:
        """A cheap fingerprint of everything the access snapshot is built from
        (tokens, visibility, blob owners), read in one transaction: equal
        signatures mean the snapshot is still right."""
        ...

    def module_archives(self) -> list[tuple[str, str]]:
        """(lower-cased namespace, archive sha256) of every module version."""
        ...

    def add_login_token(
        self,
        token_hash: str,
        prefix: str,
        grants: dict[str, str],
        who: Identity,
        description: str,
        expires_at: float,
    ) -> int:
        """Store a sign-in token (only its hash) with its scope per namespace
        ("*" for all, `grants` not empty) and whose it is; its id."""
        ...

    def put_login_state(self, key: str, payload: str, expires_at: float, now: float) -> None:
        """Keep one step of a sign-in in flight, shared by every replica."""
        ...

    def count_login_states(self, now: float, limit: int) -> int:
        """Steps not expired at `now`, on every replica; at most `limit`."""
        ...

    def take_login_state(self, key: str, now: float) -> str | None:
        """The payload under `key`, removed atomically: a second take (here or on
        another replica) gets None, as does a take after `expires_at`."""
        ...

    def create_session(self, id_hash: str, session: SessionRecord) -> None:
        """Store a web UI session under the sha256 of its id (sweeping expired ones)."""
        ...

    def session(self, id_hash: str, now: float) -> SessionRecord | None:
        """The session under `id_hash`, unless unknown, deleted or expired at `now`."""
        ...

    def delete_session(self, id_hash: str) -> bool:
        """Sign-out: whether there was such a session."""
        ...

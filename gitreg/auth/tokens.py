"""API tokens: format, hashing and scopes, and `Tokens`, which
makes, lists and revokes them.

A token is `gitreg_` + 43 url-safe base64 characters (32 random bytes). Only
its sha256 is stored; the plain token is printed once at creation. Scopes are
ordered: `admin` includes `publish`, which includes `read`. A token limited to
namespaces acts only there; one without namespaces acts everywhere.

An operator makes tokens with `gitreg token create`; a signed-in person makes
their own on /ui/tokens, each scope at most what their session's grants allow
there: a token never allows more than its creator may do, and a request for
more, or for a namespace not granted, is refused, not trimmed.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gitreg.addresses import check_name
from gitreg.auth.scopes import Scope as Scope
from gitreg.auth.store import AuthIndex, Identity, SessionRecord, TokenRecord
from gitreg.errors import BadRequest, NotFound

TOKEN_PREFIX = "gitreg_"  # noqa: S105 - a public marker, not a secret
_TOKEN_RE = re.compile(r"^gitreg_[A-Za-z0-9_-]{43}$")
_DURATION_RE = re.compile(r"^(\d{1,6})([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# What a person may choose for a token of their own: its lifetime in days, and
# the length of its name.
EXPIRY_DAYS = (7, 30, 90, 180, 365)
MAX_NAME = 100


@dataclass(frozen=True)
class Principal:
    """The holder of a valid token."""

    token_id: int
    scope: Scope
    namespaces: frozenset[str]  # lower-cased; empty means every namespace
    expires_at: float | None
    # A sign-in token's scope per lower-cased namespace, "*" for every one
    # (gitreg.auth.grants); None for an operator token, which has one scope.
    grants: Mapping[str, Scope] | None = None

    def allows(self, scope: Scope, namespace: str | None) -> bool:
        """`namespace` None means a registry-wide action, which needs an unrestricted token."""
        if self.grants is not None:
            everywhere = self.grants.get("*", 0)
            here = self.grants.get(namespace.lower(), 0) if namespace is not None else 0
            return max(everywhere, here) >= scope
        if self.scope < scope:
            return False
        if not self.namespaces:
            return True
        return namespace is not None and namespace.lower() in self.namespaces

    def expired(self, now: float | None = None) -> bool:
        return self.expires_at is not None and (now or time.time()) >= self.expires_at


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def looks_like_token(text: str) -> bool:
    return bool(_TOKEN_RE.match(text))


def parse_duration(text: str) -> float:
    """`90d`, `12h`, `30m` -> seconds."""
    match = _DURATION_RE.match(text.strip())
    if not match:
        raise BadRequest(f"duration must look like 90d, 12h or 30m, not {text[:40]!r}")
    return int(match.group(1)) * _UNITS[match.group(2)]


@dataclass(frozen=True)
class NewToken:
    """A token just made: `secret` is shown once and never stored (only its sha256)."""

    id: int
    secret: str


class Tokens:
    """Making, listing and revoking API tokens. A change reaches this process's
    access snapshot at once (`on_change`), the others' within `refresh_interval`
    (gitreg/auth/service.py)."""

    def __init__(
        self,
        store: AuthIndex,
        on_change: Callable[[], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._on_change = on_change
        self._clock = clock

    def create(
        self,
        scope: str,
        namespaces: Sequence[str] = (),
        expires_in: str = "",
        description: str = "",
    ) -> NewToken:
        """An operator's token of `scope` on `namespaces` (every namespace when
        none), expiring `expires_in` from now ("90d", "12h"; never when empty).
        BadRequest for an unknown scope, a bad namespace name or duration."""
        parsed = Scope.parse(scope)
        for namespace in namespaces:
            check_name("namespace", namespace)
        expires_at = self._clock() + parse_duration(expires_in) if expires_in else None
        secret = new_token()
        token_id = self._store.add_token(
            token_hash(secret), secret[:12], parsed.name, list(namespaces), description, expires_at
        )
        self._on_change()
        return NewToken(token_id, secret)

    def create_own(
        self, session: SessionRecord, name: str, expires_days: int | None, scopes: Mapping[str, str]
    ) -> NewToken:
        """A signed-in person's token: named `name` (whitespace collapsed, 1 to
        MAX_NAME characters), expiring after one of EXPIRY_DAYS, with per
        namespace of the session's grants the scope chosen in `scopes` ("none"
        for no access there). BadRequest for a bad name or expiry, a namespace
        the session has no grant on, a scope beyond the grant, or no scope at all."""
        name = " ".join(name.split())
        if not name or len(name) > MAX_NAME:
            raise BadRequest(f"give the token a name of 1 to {MAX_NAME} characters")
        if expires_days not in EXPIRY_DAYS:
            raise BadRequest("choose one of the offered expiries")
        grants = _within_grants(session, scopes)
        secret = new_token()
        who = Identity(session.subject, session.email, session.groups)
        expires_at = self._clock() + expires_days * 86400
        token_id = self._store.add_login_token(
            token_hash(secret), secret[:12], grants, who, name, expires_at
        )
        self._on_change()
        return NewToken(token_id, secret)

    def active(self) -> list[TokenRecord]:
        """Every token not revoked, expired ones included, oldest first."""
        return self._store.tokens()

    def owned_by(self, subject: str) -> list[TokenRecord]:
        """The active tokens `subject` made by signing in; none for no subject."""
        return [t for t in self._store.tokens() if subject and t.subject == subject]

    def revoke(self, token_id: int) -> None:
        """NotFound unless the token exists and is active."""
        self._store.revoke(token_id)
        self._on_change()

    def revoke_owned(self, subject: str, token_id: int) -> None:
        """`revoke`, for a token `subject` made by signing in; NotFound for any other."""
        if token_id not in {t.id for t in self.owned_by(subject)}:
            raise NotFound(f"no token #{token_id} of yours")
        self.revoke(token_id)


def _within_grants(session: SessionRecord, scopes: Mapping[str, str]) -> dict[str, str]:
    unknown = sorted(set(scopes) - set(session.grants))
    if unknown:
        raise BadRequest(f"you have no grant on {', '.join(unknown)[:100]}")
    grants = {}
    for namespace, choice in scopes.items():
        if choice == "none":
            continue
        scope = Scope.parse(choice)
        if scope > Scope.parse(session.grants[namespace]):
            raise BadRequest(f"{scope.name} on {namespace} is more than your groups grant you")
        grants[namespace] = scope.name
    if not grants:
        raise BadRequest("choose a scope for at least one namespace")
    return grants

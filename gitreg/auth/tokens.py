"""API tokens: format, hashing and scopes (checklist U1).

A token is `gitreg_` + 43 url-safe base64 characters (32 random bytes). Only
its sha256 is stored; the plain token is printed once at creation. Scopes are
ordered: `admin` includes `publish`, which includes `read`. A token limited to
namespaces acts only there; one without namespaces acts everywhere.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum

from gitreg.errors import BadRequest

TOKEN_PREFIX = "gitreg_"  # noqa: S105 - a public marker, not a secret
_TOKEN_RE = re.compile(r"^gitreg_[A-Za-z0-9_-]{43}$")
_DURATION_RE = re.compile(r"^(\d{1,6})([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class Scope(IntEnum):
    read = 1
    publish = 2
    admin = 3

    @classmethod
    def parse(cls, text: str) -> Scope:
        try:
            return cls[text.strip().lower()]
        except KeyError as exc:
            raise BadRequest(f"scope must be read, publish or admin, not {text[:40]!r}") from exc


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

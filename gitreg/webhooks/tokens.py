"""Tokens for `hooks/post-receive` (scope `notify`) and the admin endpoint
(scope `admin`), made with `gitreg hook-token create`.

Stop-gap until scoped API tokens (issue 6): a token is shown once, stored only
as its sha256 (it has 256 bits of entropy, so a slow hash adds nothing) and
compared in constant time against every stored hash, without early exit (U1).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from gitreg.errors import BadRequest
from gitreg.storage.hook_tokens import HookTokenRecord, HookTokenStore

PREFIX = "gitreg_hook_"
SCOPES = ("notify", "admin")
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class HookTokens:
    def __init__(self, store: HookTokenStore) -> None:
        self._store = store

    def create(self, name: str, scope: str) -> str:
        """A new token; the caller shows it once, gitreg keeps only its hash."""
        if not _NAME.match(name):
            raise BadRequest("token name: 1-64 letters, digits, '.', '_' or '-'")
        if scope not in SCOPES:
            raise BadRequest(f"scope must be one of {', '.join(SCOPES)}")
        token = PREFIX + secrets.token_urlsafe(32)
        self._store.add(name, scope, token_hash(token))
        return token

    def check(self, presented: str, scopes: tuple[str, ...]) -> str | None:
        """The name of the token if `presented` is one with one of `scopes`."""
        if not presented:
            return None
        wanted = token_hash(presented).encode()
        found: HookTokenRecord | None = None
        for record in self._store.all():
            if hmac.compare_digest(record.token_hash.encode(), wanted):
                found = record
        if found is None or found.scope not in scopes:
            return None
        self._store.touch(found.name)
        return found.name

    def all(self) -> list[HookTokenRecord]:
        return self._store.all()

    def revoke(self, name: str) -> None:
        self._store.revoke(name)

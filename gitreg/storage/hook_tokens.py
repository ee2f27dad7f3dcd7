"""SQL for notify/admin tokens (`gitreg hook-token`), stored only as sha256.

A stop-gap until scoped API tokens (issue 6) exist; that work can fold these
rows into its own table. Shares `SQLiteIndex`'s connection like `JobStore`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitreg.errors import Conflict, NotFound
from gitreg.storage.index import SQLiteIndex, utcnow


@dataclass(frozen=True)
class HookTokenRecord:
    name: str
    scope: str
    token_hash: str
    created_at: str
    last_used_at: str | None


class HookTokenStore:
    def __init__(self, index: SQLiteIndex) -> None:
        self._index = index

    def add(self, name: str, scope: str, token_hash: str) -> None:
        with self._index._write() as conn:
            if conn.execute("SELECT 1 FROM hook_tokens WHERE name = ?", (name,)).fetchone():
                raise Conflict(f"a hook token named {name!r} already exists")
            conn.execute(
                "INSERT INTO hook_tokens (name, scope, token_hash, created_at) VALUES (?, ?, ?, ?)",
                (name, scope, token_hash, utcnow()),
            )

    def all(self) -> list[HookTokenRecord]:
        rows = self._index._rows("SELECT * FROM hook_tokens ORDER BY name")
        return [
            HookTokenRecord(
                name=r["name"],
                scope=r["scope"],
                token_hash=r["token_hash"],
                created_at=r["created_at"],
                last_used_at=r["last_used_at"],
            )
            for r in rows
        ]

    def touch(self, name: str) -> None:
        with self._index._write() as conn:
            conn.execute("UPDATE hook_tokens SET last_used_at = ? WHERE name = ?", (utcnow(), name))

    def revoke(self, name: str) -> None:
        with self._index._write() as conn:
            cursor = conn.execute("DELETE FROM hook_tokens WHERE name = ?", (name,))
            if cursor.rowcount == 0:
                raise NotFound(f"no hook token named {name!r}")

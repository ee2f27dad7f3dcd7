"""SQL for web UI sessions (migration 0020; gitreg/ui/session.py).

A session is created only when a person finishes signing in, under a new
random id; the table is keyed by the id's sha256, so a copy of the database
holds no cookie that works. Expired sessions are swept whenever one is
created, so the table holds only live ones. Sessions share the index's
database, so every replica sees a sign-in and a sign-out at once.
"""

from __future__ import annotations

import json

from gitreg.auth.store import SessionRecord
from gitreg.storage.database import Row
from gitreg.storage.index import IndexBackedStore, from_row


class SessionStoreMixin(IndexBackedStore):
    """The session half of `AuthStore` (AuthIndex in gitreg/storage/protocols.py)."""

    def create_session(self, id_hash: str, session: SessionRecord) -> None:
        with self._write(notify=False) as conn:
            conn.execute("DELETE FROM ui_sessions WHERE expires_at <= ?", (session.created_at,))
            conn.execute(
                "INSERT INTO ui_sessions (id_hash, subject, email, groups, grants, csrf,"
                " created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    id_hash,
                    session.subject,
                    session.email,
                    json.dumps(list(session.groups)),
                    json.dumps(session.grants, sort_keys=True),
                    session.csrf,
                    session.created_at,
                    session.expires_at,
                ),
            )

    def session(self, id_hash: str, now: float) -> SessionRecord | None:
        rows = self._rows(
            "SELECT * FROM ui_sessions WHERE id_hash = ? AND expires_at > ?", (id_hash, now)
        )
        return _session(rows[0]) if rows else None

    def delete_session(self, id_hash: str) -> bool:
        with self._write(notify=False) as conn:
            cursor = conn.execute("DELETE FROM ui_sessions WHERE id_hash = ?", (id_hash,))
            return bool(cursor.rowcount)


def _session(row: Row) -> SessionRecord:
    return from_row(
        SessionRecord,
        row,
        groups=tuple(json.loads(row["groups"])),
        grants=dict(json.loads(row["grants"])),
        created_at=float(row["created_at"]),
        expires_at=float(row["expires_at"]),
    )

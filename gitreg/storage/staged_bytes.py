"""All SQL of the staging quotas (migration `0024-staged-bytes`).

Every file of a staged CI upload has a row holding its bytes: reserved while
the file is received, its real size once stored. The quotas are checked
against the sum of these rows and the reservation made in the same write
transaction, which the index serialises with every other writer from any
process or replica (SQLite's `BEGIN IMMEDIATE`, PostgreSQL's transaction-scoped
advisory lock): two uploads to two replicas cannot both take the last room.
Rows go when their upload is published, removed or expires, and a file's row
when its receiving fails; the cleaner drops what a crashed process left.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from gitreg.storage.database import Connection
from gitreg.storage.index import IndexBackedStore

Over = Literal["per_token", "total"]


@dataclass(frozen=True)
class StagingQuota:
    per_token: int  # bytes one token's uploads may hold together
    total: int  # bytes all uploads may hold together


@dataclass(frozen=True)
class StagedFile:
    """One file of an upload, and the token whose quota it counts in (None: only
    the total)."""

    upload_id: str
    filename: str
    token: int | None


class StagedBytesIndex(Protocol):
    def reserve(self, file: StagedFile, size: int, quota: StagingQuota, now: float) -> int | Over:
        """Reserve `size` bytes for a file about to be received: its reservation id,
        or the quota it would exceed (nothing is reserved then)."""
        ...

    def resize(
        self, reservation: int, file: StagedFile, size: int, quota: StagingQuota, now: float
    ) -> Over | None:
        """Make a reservation `size` bytes under the quotas (written again if the
        cleaner dropped it); the quota it would exceed, or None once done."""
        ...

    def settle(self, reservation: int, file: StagedFile, size: int, now: float) -> None:
        """The file was stored with `size` bytes: its row replaces any earlier
        file of the same name in the upload, and counts until the upload goes."""
        ...

    def release(self, reservation: int) -> None:
        """The file was not stored: its reservation goes (idempotent)."""
        ...

    def forget_upload(self, upload_id: str) -> None:
        """The upload was published or removed: all its rows go."""
        ...

    def forget(self, live: Iterable[str], before: float, idle_before: float) -> int:
        """Rows of uploads not in `live` written before `before`, and reservations
        of files still receiving that were not written to since `idle_before`
        (their process died): dropped; how many."""
        ...


class StagedBytesStore(IndexBackedStore):
    def reserve(self, file: StagedFile, size: int, quota: StagingQuota, now: float) -> int | Over:
        with self._write(notify=False) as conn:
            over = _over(conn, file.token, size, quota)
            if over is not None:
                return over
            row = conn.execute(
                "INSERT INTO staged_bytes (upload_id, filename, token_id, bytes, updated_at)"
                " VALUES (?, ?, ?, ?, ?) RETURNING id",
                (file.upload_id, file.filename, file.token, size, now),
            ).fetchone()
            return int(row[0])

    def resize(
        self, reservation: int, file: StagedFile, size: int, quota: StagingQuota, now: float
    ) -> Over | None:
        with self._write(notify=False) as conn:
            row = conn.execute(
                "SELECT bytes FROM staged_bytes WHERE id = ?", (reservation,)
            ).fetchone()
            over = _over(conn, file.token, size - (int(row[0]) if row else 0), quota)
            if over is not None:
                return over
            if row is not None:
                conn.execute(
                    "UPDATE staged_bytes SET bytes = ?, updated_at = ? WHERE id = ?",
                    (size, now, reservation),
                )
            else:
                _insert(conn, reservation, file, size, now, stored=False)
            return None

    def settle(self, reservation: int, file: StagedFile, size: int, now: float) -> None:
        with self._write(notify=False) as conn:
            conn.execute(
                "DELETE FROM staged_bytes WHERE upload_id = ? AND filename = ?"
                " AND stored = 1 AND id <> ?",
                (file.upload_id, file.filename, reservation),
            )
            updated = conn.execute(
                "UPDATE staged_bytes SET bytes = ?, stored = 1, updated_at = ? WHERE id = ?",
                (size, now, reservation),
            )
            if updated.rowcount == 0:
                _insert(conn, reservation, file, size, now, stored=True)

    def release(self, reservation: int) -> None:
        with self._write(notify=False) as conn:
            conn.execute("DELETE FROM staged_bytes WHERE id = ?", (reservation,))

    def forget_upload(self, upload_id: str) -> None:
        with self._write(notify=False) as conn:
            conn.execute("DELETE FROM staged_bytes WHERE upload_id = ?", (upload_id,))

    def forget(self, live: Iterable[str], before: float, idle_before: float) -> int:
        kept = set(live)
        written = self._rows(
            "SELECT DISTINCT upload_id FROM staged_bytes WHERE updated_at < ?", (before,)
        )
        gone = [str(r[0]) for r in written if str(r[0]) not in kept]
        count = 0
        with self._write(notify=False) as conn:
            for upload_id in gone:
                count += conn.execute(
                    "DELETE FROM staged_bytes WHERE upload_id = ? AND updated_at < ?",
                    (upload_id, before),
                ).rowcount
            count += conn.execute(
                "DELETE FROM staged_bytes WHERE stored = 0 AND updated_at < ?", (idle_before,)
            ).rowcount
        return count


def _insert(
    conn: Connection, reservation: int, file: StagedFile, size: int, now: float, stored: bool
) -> None:
    conn.execute(
        "INSERT INTO staged_bytes (id, upload_id, filename, token_id, bytes, stored, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (reservation, file.upload_id, file.filename, file.token, size, int(stored), now),
    )


def _over(conn: Connection, token: int | None, more: int, quota: StagingQuota) -> Over | None:
    """The quota `more` bytes would exceed (the one with less room left), or None."""
    if more <= 0:
        return None
    everyone = conn.execute("SELECT COALESCE(SUM(bytes), 0) FROM staged_bytes").fetchone()
    total_left = quota.total - int(everyone[0])
    token_left = total_left
    if token is not None:
        mine = conn.execute(
            "SELECT COALESCE(SUM(bytes), 0) FROM staged_bytes WHERE token_id = ?", (token,)
        ).fetchone()
        token_left = quota.per_token - int(mine[0])
    if more <= min(token_left, total_left):
        return None
    return "per_token" if token is not None and token_left <= total_left else "total"

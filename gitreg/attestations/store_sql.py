"""All SQL of the attestations feature (migrations 0026, 0027 and 0029).

Every append runs inside a write transaction, which the engines serialise
across processes and replicas (gitreg/storage/database.py): the next index is
read and taken under that lock, so the log has one writer at a time and no
gaps. When an append completes a run of 256 hashes of a level, the hash of
their subtree is stored at the level above, in the same transaction.
"""

from __future__ import annotations

from gitreg.attestations.store import AttestationRecord, Unattested
from gitreg.attestations.tlog import TILE_WIDTH, leaf_hash, node_hash
from gitreg.storage.database import Connection
from gitreg.storage.index import IndexBackedStore, from_row, utcnow


def _subtree(hashes: list[bytes]) -> bytes:
    """The root over a power-of-two count of hashes."""
    while len(hashes) > 1:
        hashes = [node_hash(hashes[i], hashes[i + 1]) for i in range(0, len(hashes), 2)]
    return hashes[0]


class AttestationStore(IndexBackedStore):
    def append(self, conn: Connection, entry: bytes) -> int:
        row = conn.execute("SELECT COALESCE(MAX(idx) + 1, 0) FROM tlog_entries").fetchone()
        index = int(row[0])
        conn.execute(
            "INSERT INTO tlog_entries (idx, entry, created_at) VALUES (?, ?, ?)",
            (index, entry.decode(), utcnow()),
        )
        conn.execute(
            "INSERT INTO tlog_hashes (level, idx, hash) VALUES (0, ?, ?)",
            (index, leaf_hash(entry).hex()),
        )
        level, position = 0, index
        while position % TILE_WIDTH == TILE_WIDTH - 1:
            first = position - (TILE_WIDTH - 1)
            rows = conn.execute(
                "SELECT hash FROM tlog_hashes WHERE level = ? AND idx >= ? AND idx <= ?"
                " ORDER BY idx",
                (level, first, position),
            ).fetchall()
            parent = _subtree([bytes.fromhex(r[0]) for r in rows])
            level, position = level + 1, position // TILE_WIDTH
            conn.execute(
                "INSERT INTO tlog_hashes (level, idx, hash) VALUES (?, ?, ?)",
                (level, position, parent.hex()),
            )
        return index

    def append_now(self, entry: bytes) -> int:
        with self._write() as conn:
            return self.append(conn, entry)

    def record_now(self, record: AttestationRecord, entry: bytes) -> bool:
        with self._write() as conn:
            return self.record(conn, record, entry)

    def record(self, conn: Connection, record: AttestationRecord, entry: bytes) -> bool:
        present = conn.execute(
            "SELECT 1 FROM module_attestations WHERE module_id = ? AND version_key = ?",
            (record.module_id, record.version_key),
        ).fetchone()
        if present is not None:
            return False
        index = self.append(conn, entry)
        conn.execute(
            "INSERT INTO module_attestations (module_id, version_key, archive_sha256,"
            " envelope, statement_sha256, dir_hash, keyid, log_index, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.module_id,
                record.version_key,
                record.archive_sha256,
                record.envelope,
                record.statement_sha256,
                record.dir_hash,
                record.keyid,
                index,
                record.created_at,
            ),
        )
        return True

    def attestation(self, module_id: int, version_key: str) -> AttestationRecord | None:
        rows = self._rows(
            "SELECT * FROM module_attestations WHERE module_id = ? AND version_key = ?",
            (module_id, version_key),
        )
        return from_row(AttestationRecord, rows[0]) if rows else None

    def unattested(self, after_id: int, limit: int) -> list[Unattested]:
        rows = self._rows(
            "SELECT v.module_id, v.version_key, v.id FROM module_versions v"
            " LEFT JOIN module_attestations a"
            " ON a.module_id = v.module_id AND a.version_key = v.version_key"
            " WHERE a.module_id IS NULL AND v.id > ? ORDER BY v.id LIMIT ?",
            (after_id, limit),
        )
        return [Unattested(int(r[0]), str(r[1]), int(r[2])) for r in rows]

    def backfill_completed(self) -> bool:
        return bool(self._rows("SELECT 1 FROM attestation_backfill WHERE id = 1"))

    def complete_backfill(self) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO attestation_backfill (id, completed_at) VALUES (1, ?)"
                " ON CONFLICT (id) DO UPDATE SET completed_at = excluded.completed_at",
                (utcnow(),),
            )

    def dir_hash_of(self, archive_sha256: str) -> str:
        rows = self._rows(
            "SELECT dir_hash FROM module_attestations WHERE archive_sha256 = ? LIMIT 1",
            (archive_sha256,),
        )
        return str(rows[0][0]) if rows else ""

    def size(self) -> int:
        rows = self._rows("SELECT COALESCE(MAX(idx) + 1, 0) FROM tlog_entries")
        return int(rows[0][0])

    def hashes(self, level: int, start: int, count: int) -> bytes:
        rows = self._rows(
            "SELECT hash FROM tlog_hashes WHERE level = ? AND idx >= ? AND idx < ? ORDER BY idx",
            (level, start, start + count),
        )
        return b"".join(bytes.fromhex(r[0]) for r in rows)

    def entries(self, start: int, count: int) -> list[bytes]:
        rows = self._rows(
            "SELECT entry FROM tlog_entries WHERE idx >= ? AND idx < ? ORDER BY idx",
            (start, start + count),
        )
        return [str(r[0]).encode() for r in rows]

"""All SQL of the pull-through module cache (migration `0015-module-proxy`).

Like `MirrorStore`, it shares the index's connection and writer lock. A cached
version is immutable (docs/module-proxy.md, "Pinned forever"): a second fill of the same
(module, version) keeps the first row and `add_version` returns the stored
one. An upstream tag later seen at another commit is recorded as a move, once
per (version, commit), the way `module_conflicts` records own moved tags.
"""

from __future__ import annotations

import json

from gitreg.module_proxy.store import ProxiedIndex, ProxiedMove, ProxiedVersion
from gitreg.storage.blob_refs import BLOB_COLUMNS, REFERENCED
from gitreg.storage.database import Row
from gitreg.storage.index import IndexBackedStore, from_row


class ModuleProxyStore(IndexBackedStore):
    def index(self, module_key: str) -> ProxiedIndex | None:
        rows = self._rows("SELECT * FROM module_proxy_indexes WHERE module_key = ?", (module_key,))
        if not rows:
            return None
        versions = tuple(str(v) for v in json.loads(rows[0]["versions"]))
        return ProxiedIndex(module_key, versions, float(rows[0]["fetched_at"]))

    def save_index(self, module_key: str, versions: list[str], fetched_at: float) -> None:
        document = json.dumps(versions, separators=(",", ":"))
        with self._write() as conn:
            conn.execute(
                "INSERT INTO module_proxy_indexes (module_key, versions, fetched_at)"
                " VALUES (?, ?, ?) ON CONFLICT (module_key) DO UPDATE"
                " SET versions = excluded.versions, fetched_at = excluded.fetched_at",
                (module_key, document, fetched_at),
            )

    def version(self, module_key: str, version: str) -> ProxiedVersion | None:
        rows = self._rows(
            "SELECT * FROM module_proxy_versions WHERE module_key = ? AND version = ?",
            (module_key, version),
        )
        return _version(rows[0]) if rows else None

    def versions(self, module_key: str | None = None) -> list[ProxiedVersion]:
        """Every cached version, or those of one module."""
        if module_key is None:
            rows = self._rows("SELECT * FROM module_proxy_versions ORDER BY module_key, version")
        else:
            rows = self._rows(
                "SELECT * FROM module_proxy_versions WHERE module_key = ? ORDER BY version",
                (module_key,),
            )
        return [_version(r) for r in rows]

    def add_version(self, record: ProxiedVersion) -> ProxiedVersion:
        """Insert unless present; returns the row now stored (the first fetch wins)."""
        with self._write() as conn:
            conn.execute(
                "INSERT INTO module_proxy_versions (module_key, version, host, namespace, name,"
                " system, location, git_url, ref, subdir, commit_sha, archive_sha256,"
                " archive_size, fetched_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (
                    record.module_key,
                    record.version,
                    record.host,
                    record.namespace,
                    record.name,
                    record.system,
                    record.location,
                    record.git_url,
                    record.ref,
                    record.subdir,
                    record.commit_sha,
                    record.archive_sha256,
                    record.archive_size,
                    record.fetched_at,
                ),
            )
        stored = self.version(record.module_key, record.version)
        assert stored is not None
        return stored

    def record_move(self, move: ProxiedMove) -> bool:
        """True when this move is new (reported once per upstream commit)."""
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO module_proxy_moves (module_key, version, ref, cached_commit,"
                " upstream_commit, first_seen) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    move.module_key,
                    move.version,
                    move.ref,
                    move.cached_commit,
                    move.upstream_commit,
                    move.first_seen,
                ),
            )
            return bool(cursor.rowcount)

    def moves(self) -> list[ProxiedMove]:
        rows = self._rows("SELECT * FROM module_proxy_moves ORDER BY first_seen, module_key")
        return [from_row(ProxiedMove, r) for r in rows]

    def blob_owners(self) -> list[tuple[str, str]]:
        """(namespace, archive sha256): proxied namespaces follow the same
        visibility rules as own ones, so their archives do too."""
        rows = self._rows("SELECT DISTINCT namespace, archive_sha256 FROM module_proxy_versions")
        return [(str(r[0]).lower(), str(r[1])) for r in rows]

    def blob_referenced(self, sha256: str) -> bool:
        return bool(self._rows(REFERENCED, (sha256,) * len(BLOB_COLUMNS)))


def _version(row: Row) -> ProxiedVersion:
    return from_row(ProxiedVersion, row, archive_size=int(row["archive_size"]))

"""All SQL of download counts (migration `0016-provider-docs-downloads`).

Counts arrive in batches from each process's in-memory counter
(gitreg/download_counts.py), never from a request. Each batch is one
transaction of additive upserts, so several workers and replicas flushing
into the same rows add up instead of overwriting each other. The writes do
not notify the metadata caches (`notify=False`): a count is not metadata.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitreg.storage.index import IndexBackedStore


@dataclass(frozen=True)
class DownloadRow:
    """Downloads of one version on one UTC day, by one token (0: none)."""

    kind: str  # "module" (modules.id) or "provider" (providers.id)
    object_id: int
    version: str
    day: str  # YYYY-MM-DD
    token_id: int
    downloads: int


class DownloadCountStore(IndexBackedStore):
    def add_downloads(self, rows: list[DownloadRow]) -> None:
        if not rows:
            return
        totals: dict[tuple[str, int, str], int] = {}
        for row in rows:
            key = (row.kind, row.object_id, row.version)
            totals[key] = totals.get(key, 0) + row.downloads
        with self._write(notify=False) as conn:
            for row in rows:
                conn.execute(
                    "INSERT INTO download_counts"
                    " (kind, object_id, version, day, token_id, downloads)"
                    " VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (kind, object_id, version, day, token_id)"
                    " DO UPDATE SET downloads = download_counts.downloads + excluded.downloads",
                    (row.kind, row.object_id, row.version, row.day, row.token_id, row.downloads),
                )
            for (kind, object_id, version), count in totals.items():
                conn.execute(
                    "INSERT INTO download_totals (kind, object_id, version, downloads)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (kind, object_id, version)"
                    " DO UPDATE SET downloads = download_totals.downloads + excluded.downloads",
                    (kind, object_id, version, count),
                )

    def download_totals(self) -> dict[tuple[str, int], int]:
        rows = self._rows(
            "SELECT kind, object_id, SUM(downloads) FROM download_totals GROUP BY kind, object_id"
        )
        return {(str(r[0]), int(r[1])): int(r[2]) for r in rows}

    def version_downloads(self, kind: str, object_id: int) -> dict[str, int]:
        rows = self._rows(
            "SELECT version, downloads FROM download_totals WHERE kind = ? AND object_id = ?",
            (kind, object_id),
        )
        return {str(r[0]): int(r[1]) for r in rows}

    def downloads_by_token(
        self, kind: str, object_id: int, since_day: str
    ) -> dict[tuple[str, int], int]:
        """{(version, token_id): downloads} since a UTC day: who uses which
        version (issue 14's "who still downloads 1.x in the last 30 days")."""
        rows = self._rows(
            "SELECT version, token_id, SUM(downloads) FROM download_counts"
            " WHERE kind = ? AND object_id = ? AND day >= ? GROUP BY version, token_id",
            (kind, object_id, since_day),
        )
        return {(str(r[0]), int(r[1])): int(r[2]) for r in rows}

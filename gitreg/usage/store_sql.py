"""All SQL of download counts (migration `0016-provider-docs-downloads`).

Counts arrive in batches from each process's in-memory counter
(gitreg/usage/counter.py), never from a request. Each batch is one
transaction of additive upserts, so several workers and replicas flushing
into the same rows add up instead of overwriting each other. The writes do
not notify the metadata caches (`notify=False`): a count is not metadata.
"""

from __future__ import annotations

import json
from array import array

from gitreg.storage.index import IndexBackedStore
from gitreg.usage.store import DownloadRow, DownloadTotals, UsageRow

TOTALS_PAGE = 1_000  # rows per read of the totals: the rows in flight stay small


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

    def download_totals(self) -> DownloadTotals:
        totals = DownloadTotals()
        for kind in ("module", "provider"):
            ids, counts = array("q"), array("q")
            while True:  # by pages in primary-key order: never every row at once
                rows = self._rows(
                    "SELECT object_id, SUM(downloads) FROM download_totals"
                    " WHERE kind = ? AND object_id > ? GROUP BY object_id"
                    " ORDER BY object_id LIMIT ?",
                    (kind, ids[-1] if ids else -1, TOTALS_PAGE),
                )
                ids.extend(int(r[0]) for r in rows)
                counts.extend(int(r[1]) for r in rows)
                if len(rows) < TOTALS_PAGE:
                    break
            totals.ids[kind], totals.counts[kind] = ids, counts
        return totals

    def usage_rows(self, kind: str, object_id: int, since_day: str) -> list[UsageRow]:
        """Downloads per (version, token) since a UTC day, joined to each
        token's owner in one query; revoked tokens still name their owner."""
        # Summed first, joined after: portable (no GROUP BY over text columns on
        # PostgreSQL) and one owner lookup per token rather than per day.
        rows = self._rows(
            "SELECT c.version, c.token_id, c.n, t.prefix, t.description, t.subject,"
            " t.email, t.groups FROM (SELECT version, token_id, SUM(downloads) AS n"
            " FROM download_counts WHERE kind = ? AND object_id = ? AND day >= ?"
            " GROUP BY version, token_id) c LEFT JOIN api_tokens t ON t.id = c.token_id"
            " ORDER BY c.version, c.token_id",
            (kind, object_id, since_day),
        )
        return [
            UsageRow(
                str(r[0]),
                int(r[1]),
                int(r[2]),
                str(r[3] or ""),
                str(r[4] or ""),
                str(r[5] or ""),
                str(r[6] or ""),
                tuple(json.loads(r[7])) if r[7] else (),
            )
            for r in rows
        ]

    def recent_totals(self, kind: str, since_day: str) -> dict[int, int]:
        rows = self._rows(
            "SELECT object_id, SUM(downloads) FROM download_counts"
            " WHERE kind = ? AND day >= ? GROUP BY object_id",
            (kind, since_day),
        )
        return {int(r[0]): int(r[1]) for r in rows}

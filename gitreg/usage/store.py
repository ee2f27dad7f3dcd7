"""What download usage needs from the index, and the records it hands out."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class DownloadRow:
    """Downloads of one version on one UTC day, by one token (0: none)."""

    kind: str  # "module" (modules.id) or "provider" (providers.id)
    object_id: int
    version: str
    day: str  # YYYY-MM-DD
    token_id: int
    downloads: int


@dataclass(frozen=True)
class DownloadTotals:
    """Downloads per module and per provider over every version and day, as
    sorted arrays of ids and counts per kind. Every serving process holds
    these (browse records show them), so they are arrays of 16 bytes an
    entry rather than a dict of `(kind, id)` tuples (docs/performance.md,
    worker memory)."""

    ids: dict[str, array[int]] = field(default_factory=dict)
    counts: dict[str, array[int]] = field(default_factory=dict)

    def get(self, kind: str, object_id: int) -> int:
        ids = self.ids.get(kind)
        if not ids:
            return 0
        at = bisect_left(ids, object_id)
        return self.counts[kind][at] if at < len(ids) and ids[at] == object_id else 0

    def as_dict(self) -> dict[tuple[str, int], int]:
        return {
            (kind, object_id): count
            for kind, ids in self.ids.items()
            for object_id, count in zip(ids, self.counts[kind], strict=True)
        }


@dataclass(frozen=True)
class UsageRow:
    """Downloads of one version by one token over some days, with the token's
    owner as stored; token 0 and a token no
    longer in `api_tokens` come with empty owner fields."""

    version: str
    token_id: int
    downloads: int
    prefix: str = ""
    description: str = ""
    subject: str = ""
    email: str = ""
    groups: tuple[str, ...] = ()


class DownloadCountIndex(Protocol):
    """Download counts (SQL in storage/download_counts.py)."""

    def add_downloads(self, rows: list[DownloadRow]) -> None:
        """Add each row's count to its stored row (upsert), all in one
        transaction: flushes from several processes add up."""
        ...

    def download_totals(self) -> DownloadTotals:
        """Downloads over every version and day, by kind and object id."""
        ...

    def usage_rows(self, kind: str, object_id: int, since_day: str) -> list[UsageRow]:
        """Downloads per (version, token) since `since_day`, with each token's owner."""
        ...

    def recent_totals(self, kind: str, since_day: str) -> dict[int, int]:
        """Downloads per object of `kind` since `since_day`, every version and
        reader together (objects without any are left out)."""
        ...

"""The download counter resolves names to ids per batch: a module removed and
registered again (a new id) gets the next batch's counts, not its old id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from gitreg.download_counts import DownloadCounter
from gitreg.storage.catalog_protocols import DownloadCountIndex
from gitreg.storage.download_counts import DownloadRow
from gitreg.storage.protocols import ModuleIndex, ProviderIndex


@dataclass
class _Module:
    id: int


class _Modules:
    def __init__(self) -> None:
        self.id = 1

    def find_module(self, namespace: str, name: str, system: str) -> _Module:
        return _Module(self.id)


class _Counts:
    def __init__(self) -> None:
        self.rows: list[DownloadRow] = []

    def add_downloads(self, rows: list[DownloadRow]) -> None:
        self.rows.extend(rows)


def test_a_module_registered_again_is_counted_under_its_new_id() -> None:
    modules, counts = _Modules(), _Counts()
    counter = DownloadCounter(
        cast(DownloadCountIndex, counts), cast(ModuleIndex, modules), cast(ProviderIndex, None)
    )
    key = ("module", "Acme", "hello", "null", "1.0.0", 0)
    counter.write({key: 2})
    modules.id = 9  # removed and registered again by another process
    counter.write({key: 3})
    assert [(r.object_id, r.downloads) for r in counts.rows] == [(1, 2), (9, 3)]

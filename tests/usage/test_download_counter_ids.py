"""The download counter resolves names to ids per batch (a module removed and
registered again, a new id, gets the next batch's counts, not its old id), and
retries a database that is away once an interval, losing nothing."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import cast

import pytest

from gitreg.providers.store import ProviderIndex
from gitreg.storage.protocols import ModuleIndex
from gitreg.usage import counter as download_counts
from gitreg.usage.counter import DownloadCounter
from gitreg.usage.store import DownloadCountIndex, DownloadRow, DownloadTotals


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


class _Away:
    def __init__(self) -> None:
        self.tries = 0

    def add_downloads(self, rows: list[DownloadRow]) -> None:
        self.tries += 1
        raise OSError("database is away")

    def download_totals(self) -> DownloadTotals:
        return DownloadTotals()


def test_a_full_counter_retries_an_absent_database_once_an_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(download_counts, "MAX_PENDING", 1)
    store = _Away()
    counter = DownloadCounter(
        cast(DownloadCountIndex, store), cast(ModuleIndex, _Modules()), cast(ProviderIndex, None)
    )

    async def downloads() -> None:
        task = asyncio.create_task(counter.run(0.25))
        for _ in range(200):  # a steady stream of downloads for about half a second
            counter.add(("module", "acme", "hello", "null", "1.0.0", 0))
            await asyncio.sleep(0.0025)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    started = time.monotonic()
    asyncio.run(downloads())
    intervals = (time.monotonic() - started) / 0.25  # a busy machine makes it longer
    assert 1 <= store.tries <= intervals + 2
    assert sum(counter.take().values()) == 200  # nothing lost while it was away

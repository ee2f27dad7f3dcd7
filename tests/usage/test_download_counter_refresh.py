"""A counter that fills up flushes early, but re-reads every module's total
(one query over the whole table) at most once an interval: a load over every
module of a large index fills the counter every 500 downloads."""

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
    def find_module(self, namespace: str, name: str, system: str) -> _Module:
        return _Module(int(name[1:]))


class _Counts:
    def __init__(self) -> None:
        self.batches = 0
        self.downloads = 0
        self.reads = 0

    def add_downloads(self, rows: list[DownloadRow]) -> None:
        self.batches += 1
        self.downloads += sum(r.downloads for r in rows)

    def download_totals(self) -> DownloadTotals:
        self.reads += 1
        return DownloadTotals()


def test_early_flushes_reread_the_totals_once_an_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(download_counts, "MAX_PENDING", 5)
    store = _Counts()
    counter = DownloadCounter(
        cast(DownloadCountIndex, store), cast(ModuleIndex, _Modules()), cast(ProviderIndex, None)
    )

    async def downloads() -> None:
        task = asyncio.create_task(counter.run(0.25))
        for i in range(300):  # distinct modules, about 0.6 s
            counter.add(("module", "acme", f"m{i}", "aws", "1.0.0", 0))
            await asyncio.sleep(0.002)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    started = time.monotonic()
    asyncio.run(downloads())
    intervals = (time.monotonic() - started) / 0.25  # a busy machine makes it longer
    counter.flush()
    assert store.downloads == 300  # every download stored
    assert store.batches > intervals + 3  # the full counter flushed early, often
    assert store.reads <= intervals + 3  # the start, then once an interval, then flush

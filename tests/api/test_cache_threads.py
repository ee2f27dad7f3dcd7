"""The metadata cache under threads: an invalidation racing a fill never leaves
a stale entry. Fills run on event loops, as requests do; publishes
run on plain threads, as job workers do: change the "database", then invalidate.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType

import pytest

from gitreg import cache as cache_module
from gitreg.cache import MetadataCache

KEYS = 8
FILLERS = 3
PUBLISHERS = 3


class Database:
    """A value publishers bump; builders read it, then take a while, like a query."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def publish(self, cache: MetadataCache[int]) -> int:
        """Commit a new value, then invalidate, as a publisher does; the value."""
        with self._lock:
            self.value += 1
            committed = self.value
        cache.invalidate()
        return committed

    def build(self) -> int:
        seen = self.value
        time.sleep(0.0005)
        return seen


@pytest.fixture(autouse=True)
def tight_thread_switching() -> Iterator[None]:
    """Switch threads often, so that a window of a few bytecodes is hit."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _pause_inside_the_cache(frame: FrameType, event: str, arg: object) -> None:
    """Let other threads run before every builtin the cache's code calls: the
    scheduler would switch there only rarely, and a race needs just one switch."""
    if event == "c_call" and frame.f_code.co_filename == cache_module.__file__:
        time.sleep(0.0001)


def _fill_until(cache: MetadataCache[int], db: Database, stop: threading.Event) -> None:
    async def fill() -> None:
        while not stop.is_set():
            await asyncio.gather(*(cache.get(k, db.build) for k in range(KEYS)))

    sys.setprofile(_pause_inside_the_cache)
    try:
        asyncio.run(fill())
    finally:
        sys.setprofile(None)


def _stale(cache: MetadataCache[int], floor: int) -> dict[int, int]:
    # peek answers `T | object` (T or the MISSING sentinel); every value here is an int.
    return {k: v for k in range(KEYS) if isinstance(v := cache.peek(k), int) and v < floor}


def _publish(cache: MetadataCache[int], db: Database, times: int, stale: list[str]) -> None:
    """Once an invalidation has returned, no entry may hold a value read before
    the commit it followed: watch for one while fills go on."""
    for _ in range(times):
        committed = db.publish(cache)
        for _ in range(3):
            if found := _stale(cache, committed):
                stale.append(f"entries {found} after the invalidation of {committed}")
            time.sleep(0.0001)


def _round(cache: MetadataCache[int], db: Database, stale: list[str]) -> None:
    stop = threading.Event()
    fillers = [threading.Thread(target=_fill_until, args=(cache, db, stop)) for _ in range(FILLERS)]
    publishers = [
        threading.Thread(target=_publish, args=(cache, db, 30, stale)) for _ in range(PUBLISHERS)
    ]
    for thread in fillers + publishers:
        thread.start()
    for thread in publishers:
        thread.join()
    stop.set()
    for thread in fillers:
        thread.join()


def test_no_entry_outlives_an_invalidation_that_followed_its_build() -> None:
    """At every quiescent point (no publish or fill running), every cached entry
    must hold the current value: each entry whose build started before the last
    invalidation was either refused or dropped by it."""
    cache: MetadataCache[int] = MetadataCache(lambda: 0)
    db = Database()
    stale: list[str] = []
    deadline = time.monotonic() + 2.0
    rounds = 0
    while time.monotonic() < deadline and not stale:
        _round(cache, db, stale)
        rounds += 1
        assert not _stale(cache, db.value), f"round {rounds}: stale at a quiescent point"
    assert not stale, stale[:5]
    assert rounds >= 2


def test_concurrent_invalidations_all_count() -> None:
    """`generation` moves on every invalidation, whichever thread makes it, so a
    fill that spans any of them is refused."""
    cache: MetadataCache[int] = MetadataCache(lambda: 0)

    def invalidate_many() -> None:
        for _ in range(2000):
            cache.invalidate()

    threads = [threading.Thread(target=invalidate_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.generation == 8000

"""Pre-serialised metadata, invalidated on publish.

Metadata answers (discovery, versions, download) are served from bytes built
once, so the request path does no JSON encoding and no database work on a hit
(and never a write). A publish in this process clears the cache at once; a
publish by another process (CLI, another worker) is noticed through SQLite's
`PRAGMA data_version`, polled off the event loop every `refresh_interval`.

Publishes invalidate from job threads while fills store from the event loop,
so both take one lock: a fill stores only if no invalidation happened since
its build started, checked and stored in one step, so an invalidation racing
a fill can never leave a stale entry. Lookups (`peek`, the hot path measured
in docs/performance.md) take no lock: they read whichever dict is current, and
entries are only ever added to it under the lock or the whole dict replaced.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from starlette.concurrency import run_in_threadpool

from gitreg import metrics

T = TypeVar("T")
log = logging.getLogger("gitreg.cache")

# Bounded so that requests for millions of made-up names cannot grow memory
# without limit; a full cache starts over, which only costs rebuilds.
MAX_ENTRIES = 50_000
# "Not found" answers are cached too (so made-up names cost no database read),
# but under a smaller bound of their own: a flood of made-up names then cannot
# push a worker past its memory budget (bench/rss.py, docs/performance.md).
MAX_NOT_FOUND = 5_000
MISSING = object()


class MetadataCache(Generic[T]):
    def __init__(self, data_version: Callable[[], int]) -> None:
        self._data_version = data_version
        self._seen_version = data_version()
        self._entries: dict[Hashable, T] = {}
        self._not_found = 0
        self._lock = threading.Lock()
        self.generation = 0

    def invalidate(self) -> None:
        with self._lock:
            metrics.cache_evicted("invalidated", len(self._entries))
            self._entries = {}
            self._not_found = 0
            self.generation += 1
        metrics.cache_size(0)

    def peek(self, key: Hashable) -> T | object:
        """The cached value or `MISSING`: no coroutine, no thread, for hot paths."""
        return self._entries.get(key, MISSING)

    async def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The cached value, or `build()` run in a thread and kept."""
        try:
            return self._entries[key]
        except KeyError:
            pass
        generation = self.generation
        value = await run_in_threadpool(build)
        self._store(key, value, generation)
        return value

    def _store(self, key: Hashable, value: T, generation: int) -> None:
        """Keep `value` only if nothing was invalidated since its build started."""
        with self._lock:
            if generation != self.generation:
                return
            if len(self._entries) >= MAX_ENTRIES:
                metrics.cache_evicted("full", len(self._entries))
                self._entries = {}
                self._not_found = 0
            if value is None:
                if self._not_found >= MAX_NOT_FOUND:
                    kept = {k: v for k, v in self._entries.items() if v is not None}
                    metrics.cache_evicted("not_found_full", len(self._entries) - len(kept))
                    self._entries = kept
                    self._not_found = 0
                self._not_found += 1
            self._entries[key] = value
            metrics.cache_size(len(self._entries))

    async def watch(self, interval: float) -> None:
        """Poll for commits by other processes until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                current = await run_in_threadpool(self._data_version)
            except Exception:  # a locked or vanished database must not kill the watcher
                log.exception("cannot read the index's data_version")
                continue
            if current != self._seen_version:
                self._seen_version = current
                self.invalidate()

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
entries are only ever added or removed under the lock, or the whole dict replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import anyio
import anyio.to_thread

from gitreg.metrics import service as metrics

T = TypeVar("T")
log = logging.getLogger("gitreg.cache")

# Bounded so that requests for millions of made-up names, or a fleet reading
# every version of 10,000 modules, cannot grow memory without limit (the per-worker
# memory target, docs/performance.md "Memory of one worker", which also gives
# what this bound costs in RSS). The bound is in approximate bytes, since an
# entry is a 100-byte download location or a module list of thousands of
# versions; when it is reached the oldest entries go first, which costs only
# rebuilds.
MAX_BYTES = 3 * 1024 * 1024
# What an entry holds besides its body: the key tuple of path strings, the dict
# slot, and a small value (sizes by tracemalloc: docs/performance.md, "Memory of
# one worker").
ENTRY_BYTES = 512
# "Not found" answers are cached too (so made-up names cost no database read),
# but under a smaller bound of their own: a flood of made-up names then cannot
# push real answers out (bench/rss.py, docs/performance.md).
MAX_NOT_FOUND = 5_000
# One answer may take at most this share of the bound: a larger one is rebuilt
# on each request instead of evicting every other entry and holding the cache
# past its bound by itself. The browse list, which outgrows it at ~3,000
# modules, is a `snapshot` instead.
LARGEST_SHARE = 2
MISSING = object()
# Builds (cache misses) running on worker threads at once, by default: the
# SQLite index has 8 read connections (storage/sqlite.py MAX_READERS), so
# more builds only wait for one on threads of their own. Each thread Starlette's
# pool starts for them stays in the worker's RSS (docs/performance.md, "Memory
# of one worker").
BUILD_THREADS = 8


def entry_bytes(value: object) -> int:
    """An entry's approximate size: bodies by their length, lists and dicts
    (browse records) by their length, anything else as one small entry."""
    if isinstance(value, bytes | str):
        return ENTRY_BYTES + len(value)
    held = getattr(value, "cache_bytes", None)
    if isinstance(held, int):  # a value that knows what it holds (gitreg/oci/service.py)
        return ENTRY_BYTES + held
    body = getattr(value, "body", None)
    if isinstance(body, bytes):  # CachedJson: the body, its ETag, its response
        return 3 * ENTRY_BYTES + len(body)
    if isinstance(value, list | dict):
        return ENTRY_BYTES * (1 + len(value))
    return ENTRY_BYTES


class MetadataCache(Generic[T]):
    def __init__(
        self,
        data_version: Callable[[], int],
        max_bytes: int = MAX_BYTES,
        build_threads: int = BUILD_THREADS,
    ) -> None:
        self._data_version = data_version
        self._build_threads = build_threads
        self._limiter: tuple[asyncio.AbstractEventLoop, anyio.CapacityLimiter] | None = None
        self._seen_version = data_version()
        self._max_bytes = max_bytes
        self._entries: dict[Hashable, T] = {}
        # Keys in the order they were stored, with their sizes: the oldest go first.
        self._order: deque[tuple[Hashable, int]] = deque()
        self._bytes = 0
        self._not_found = 0
        self._lock = threading.Lock()
        self.generation = 0
        # One value per registry (the browse list of every module), kept apart
        # from the byte bound: at 10,000 modules it is over the bound alone, and
        # rebuilding it reads the index for every module (see `snapshot`).
        self._snapshots: dict[Hashable, T] = {}

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def invalidate(self) -> None:
        with self._lock:
            metrics.cache_evicted("invalidated", len(self._entries))
            self._reset({})
            self._snapshots = {}
            self.generation += 1
        metrics.cache_size(0)

    def _reset(self, kept: dict[Hashable, T]) -> None:
        self._entries = kept
        self._order = deque((k, entry_bytes(v)) for k, v in kept.items())
        self._bytes = sum(size for _, size in self._order)
        self._not_found = 0

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
        value = await self._build(build)
        self._store(key, value, generation)
        return value

    async def snapshot(self, key: Hashable, build: Callable[[], T]) -> T:
        """Like `get`, for the few values that stand for the whole registry
        (a fixed set of keys, never one per request path): kept whatever their
        size until the next invalidation, instead of being rebuilt on every
        request once they outgrow the byte bound."""
        try:
            return self._snapshots[key]
        except KeyError:
            pass
        generation = self.generation
        value = await self._build(build)
        with self._lock:
            if generation == self.generation:
                self._snapshots[key] = value
        return value

    async def _build(self, build: Callable[[], T]) -> T:
        """`build()` on a worker thread, at most `build_threads` at a time; the
        others wait on the event loop, holding no thread."""
        loop = asyncio.get_running_loop()
        if self._limiter is None or self._limiter[0] is not loop:  # an app started again
            self._limiter = (loop, anyio.CapacityLimiter(self._build_threads))
        return await anyio.to_thread.run_sync(build, limiter=self._limiter[1])

    def _store(self, key: Hashable, value: T, generation: int) -> None:
        """Keep `value` only if nothing was invalidated since its build started."""
        with self._lock:
            if generation != self.generation or key in self._entries:
                return
            size = entry_bytes(value)
            if size > self._max_bytes // LARGEST_SHARE:
                return  # kept, it would push out most of the cache, or exceed it alone
            if value is None:
                if self._not_found >= MAX_NOT_FOUND:
                    kept = {k: v for k, v in self._entries.items() if v is not None}
                    metrics.cache_evicted("not_found_full", len(self._entries) - len(kept))
                    self._reset(kept)
                self._not_found += 1
            self._evict(self._max_bytes - size)
            self._entries[key] = value
            self._order.append((key, size))
            self._bytes += size
            metrics.cache_size(len(self._entries))

    def _evict(self, room: int) -> None:
        """Drop the oldest entries until at most `room` bytes are held."""
        evicted = 0
        while self._bytes > room and self._order:
            old, size = self._order.popleft()
            # Deleting while `peek` reads without the lock is safe: a lookup
            # sees the entry or MISSING, and a miss only rebuilds.
            if self._entries.pop(old, MISSING) is None:
                self._not_found -= 1
            self._bytes -= size
            evicted += 1
        if evicted:
            metrics.cache_evicted("full", evicted)

    async def watch(self, interval: float, stop: asyncio.Event) -> None:
        """Poll for commits by other processes until `stop` is set, never in the
        middle of a read (its thread would outlive the index it reads)."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)
                return
            try:
                current = await anyio.to_thread.run_sync(self._data_version)
            except Exception:  # a locked or vanished database must not kill the watcher
                log.exception("cannot read the index's data_version")
                continue
            if current != self._seen_version:
                self._seen_version = current
                self.invalidate()

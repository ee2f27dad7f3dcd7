"""Counting downloads without writing to the database on the request path.

Module and provider downloads are counted per version, per UTC day and per
token. A download adds one to an in-memory dict keyed by the
path values as sent (`add`: one dict increment on the event loop's thread, no
lock, no lookup); `run`, a task of the app's lifespan, swaps the dict every
`interval` seconds (or sooner when it holds `MAX_PENDING` keys) and writes
the batch from a thread: path values resolved to module/provider ids and
version keys, then one transaction of additive upserts through
`DownloadCountIndex`, so workers and replicas add up. The app's shutdown
flushes what is left; a crash loses at most the last interval.

After each flush the totals per module and provider are read back (one
query), so records show counts from every replica without a query per
request (`total`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from anyio.to_thread import run_sync

from gitreg import logs
from gitreg.errors import GitregError, NotAVersion, is_outage
from gitreg.providers.store import ProviderIndex
from gitreg.storage.protocols import ModuleIndex
from gitreg.usage.store import DownloadCountIndex, DownloadRow, DownloadTotals
from gitreg.versions import parse_tag_version

log = logging.getLogger("gitreg.modules.downloads")

# (kind, namespace, name, system or "", version, token id), all as sent in the path.
Key = tuple[str, str, str, str, str, int]
FLUSH_SECONDS = 5.0  # at most this much counting is lost when a process is killed
# Distinct keys before an early flush. Each holds the path's strings and its
# flush as much again, so this bounds a worker's memory under a load over many
# modules; the CPU per key is the same at any batch size (docs/performance.md).
MAX_PENDING = 500


class DownloadCounter:
    def __init__(
        self, store: DownloadCountIndex, index: ModuleIndex, providers: ProviderIndex
    ) -> None:
        self.store = store
        self._index = index
        self._providers = providers
        self._pending: dict[Key, int] = {}
        self._totals = DownloadTotals()
        self._full = asyncio.Event()
        self._stopping = asyncio.Event()
        self._refreshed = 0.0  # time.monotonic() of the last `refresh`

    def add(self, key: Key) -> None:
        """Count one download (event loop thread only)."""
        pending = self._pending
        pending[key] = pending.get(key, 0) + 1
        if len(pending) >= MAX_PENDING:
            self._full.set()

    def total(self, kind: str, object_id: int) -> int:
        """Downloads of a module or provider over all versions, as of the last flush."""
        return self._totals.get(kind, object_id)

    def take(self) -> dict[Key, int]:
        """The counts so far, leaving an empty dict (event loop thread only)."""
        batch, self._pending = self._pending, {}
        self._full.clear()
        return batch

    async def run(self, interval: float) -> None:
        """Flush every `interval` seconds until `stop` is called. It returns only
        between two database calls: a task cancelled while its thread reads
        would leave that thread running into the shutdown's close of the index."""
        self._full = asyncio.Event()  # of this loop: an app may be started again
        self._stopping = asyncio.Event()
        await run_sync(self.refresh)
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):  # the interval passed
                await asyncio.wait_for(self._full.wait(), interval)
            if self._stopping.is_set():
                return  # `flush` writes the rest
            batch = self.take()
            try:
                await run_sync(self.write, batch)
            except Exception as exc:  # the database is away: keep the counts for the next try
                logs.failure(log, exc, "cannot write %d download counts, retrying", len(batch))
                for key, count in batch.items():
                    self._pending[key] = self._pending.get(key, 0) + count
                # A full dict sets `_full` on every download: wait the interval
                # anyway, or a database that is away is retried in a tight loop.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), interval)
                continue
            # After an early flush, only once an interval: re-reading every
            # module's total per 500 downloads would cost more than it saves.
            if time.monotonic() - self._refreshed >= interval:
                await run_sync(self.refresh)

    def stop(self) -> None:
        """Make `run` return at its next step (event loop thread only)."""
        self._stopping.set()
        self._full.set()

    def flush(self) -> None:
        """Write what is pending now (shutdown, with the loop no longer counting)."""
        batch = self.take()
        try:
            self.write(batch)
        except Exception:  # shutting down: report the loss, do not hide other errors
            log.exception("lost %d download counts at shutdown", len(batch))
        self.refresh()

    def write(self, batch: dict[Key, int]) -> None:
        """Blocking: resolve and store a batch (one transaction); raises if the
        database refuses it, and then nothing of it was stored."""
        day = time.strftime("%Y-%m-%d", time.gmtime())
        rows: dict[tuple[str, int, str, int], int] = {}
        # Names to ids for this batch only: a module removed and registered
        # again gets a new id, and the next batch must count to that one.
        ids: dict[tuple[str, str, str, str], int | None] = {}
        keys: dict[str, str | None] = {}  # version as sent -> as stored, once per batch
        for (kind, namespace, name, system, version, token), count in batch.items():
            # Names as counted (lower-cased by gitreg/usage/http_counting.py; the
            # lookups lower-case them again): no new strings per key, which
            # would be much of a large flush's memory.
            found = self._resolve(ids, keys, (kind, namespace, name, system), version)
            if found is not None:
                key = (kind, found[0], found[1], token)
                rows[key] = rows.get(key, 0) + count
        self.store.add_downloads(
            [DownloadRow(k, i, v, day, t, n) for (k, i, v, t), n in rows.items()]
        )

    def refresh(self) -> None:
        """Re-read the totals (every replica's counts); a failure keeps the old ones."""
        self._refreshed = time.monotonic()
        try:
            self._totals = self.store.download_totals()
        except Exception as exc:  # the database is away: stale totals, not a dead task
            logs.failure(log, exc, "cannot read download totals")

    def _resolve(
        self,
        ids: dict[tuple[str, str, str, str], int | None],
        keys: dict[str, str | None],
        names: tuple[str, str, str, str],
        version: str,
    ) -> tuple[int, str] | None:
        """(object id, version key) of counted path values; None if gone."""
        key: str | None = version
        if names[0] == "module":  # stored by their key without build metadata
            if version not in keys:
                keys[version] = _version_key(version)
            key = keys[version]
        if key is None:
            return None
        if names not in ids:
            ids[names] = self._lookup(*names)
        object_id = ids[names]
        return None if object_id is None else (object_id, key)

    def _lookup(self, kind: str, namespace: str, name: str, system: str) -> int | None:
        try:
            if kind == "module":
                module = self._index.find_module(namespace, name, system)
                return None if module is None else module.id
            provider = self._providers.find_provider(f"{namespace}/{name}")
            return None if provider is None else provider.id
        except GitregError as exc:
            if is_outage(exc):  # not gone, only unreachable: keep the counts
                raise
            return None


def _version_key(version: str) -> str | None:
    try:
        return str(parse_tag_version(version).without_build())
    except NotAVersion:
        return None

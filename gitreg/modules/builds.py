"""Building the archives a sync needs, in worker processes when there are several.

An archive build is mostly Python (tree walk, tar headers, blob reads) holding the
GIL, so threads do not run builds side by side; processes do (measured in
docs/performance.md "Publishing": threads gain nothing beyond the deflate, which
ISA-L already makes small). `repo add` of a repository with 200 tags therefore
builds on every core; a sync that needs one archive, or a few small ones, builds
them in-process, since a worker process costs a few hundred milliseconds to start.

Workers write each archive to a scratch file; this process streams it into the
blob store (durable first) and only then is a version recorded by the
publisher. A worker never touches the index or the blob store itself.
"""

from __future__ import annotations

import concurrent.futures as futures
import logging
import multiprocessing
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from gitreg.archives.build import ArchiveLimits
from gitreg.archives.cache import DEFAULT_CACHE_BYTES, SubtreeCache
from gitreg.errors import ArchiveTooLarge
from gitreg.git.backend import GitBackend
from gitreg.metrics import service as metrics
from gitreg.storage.blobs import BlobStore

log = logging.getLogger("gitreg.publisher")

# What starting the worker processes costs (spawn + importing dulwich and gitreg's
# archive code: 0.3-0.5 s here, docs/performance.md "Publishing").
_WORKER_START_SECONDS = 1.0
# No build finishing for this long means a worker is hung (a build at the default
# limits takes seconds): the workers are killed and the rest is built here, so a
# sync does not hold its repository's lock, and its job's lease, forever.
_STALL_SECONDS = 600.0


@dataclass(frozen=True)
class ArchiveKey:
    """What an archive is made of: a tree (the root tree, or with `subdir` that
    directory's tree, archived under its path) and the mtime of every entry."""

    tree_sha: str
    subdir: str
    mtime: int


@dataclass(frozen=True)
class Built:
    sha256: str
    size: int
    skipped: tuple[str, ...]  # "path: reason" for each entry left out
    dir_hash: str = ""  # `h1:` of the files (gitreg/archives/dirhash.py); "" if not built now


def worker_count(setting: int) -> int:
    """`archive_workers`, or with 0 the cores this process may run on."""
    if setting > 0:
        return setting
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class ArchiveBuilds:
    """Builds archives into the blob store with one builder (gitreg/archives/format.py)."""

    def __init__(
        self,
        git: GitBackend,
        blobs: BlobStore,
        limits: ArchiveLimits,
        builder: Callable[[], str],
        workers: int,
    ) -> None:
        self._git = git
        self._blobs = blobs
        self._limits = limits
        self._choose_builder = builder
        self._builder = ""
        self._workers = workers
        self._pool = threading.Lock()

    @property
    def builder(self) -> str:
        """Chosen at the first build, so a server process that never publishes does
        not import the deflate library (gitreg/archives/format.py `fast_builder`)."""
        if not self._builder:
            self._builder = self._choose_builder()
        return self._builder

    def build_one(self, mirror: Path, key: ArchiveKey, cache: SubtreeCache | None = None) -> Built:
        """Build in this process; raises ArchiveTooLarge (nothing is stored then)."""
        started = time.monotonic()
        with self._blobs.writer() as sink:
            report = self._git.archive(
                mirror,
                key.tree_sha,
                cast(BinaryIO, sink),
                key.mtime,
                self._limits,
                builder=self.builder,
                subdir=key.subdir,
                cache=cache,
            )
        metrics.archive_built(time.monotonic() - started)
        assert sink.result is not None
        return Built(sink.result.sha256, sink.result.size, tuple(report.skipped), report.dir_hash)

    def build_many(
        self, mirror: Path, keys: Sequence[ArchiveKey]
    ) -> Iterator[tuple[ArchiveKey, Built | str]]:
        """Each key with its archive, or why there is none (ArchiveTooLarge's
        message), in the order builds finish. The keys are built in the order
        given (a repository's tags oldest first): neighbouring tags share most
        directories, which a build takes from the previous one's
        (gitreg/archives/cache.py). The cache lives as long as this call, so a
        server process does not keep it after a sync."""
        rest = list(keys)
        # One build has no next build to serve: a server's sync of one new tag
        # keeps nothing (its memory: docs/performance.md).
        cache = SubtreeCache(DEFAULT_CACHE_BYTES if len(rest) > 1 else 0)
        while rest:
            key = rest.pop(0)
            started = time.monotonic()
            yield key, self._here(mirror, key, cache)
            workers = min(self._workers, len(rest))
            # Processes pay off once the builds they would take over save more than
            # starting them costs; small modules are built here, one after another.
            saved = (time.monotonic() - started) * len(rest) * (1 - 1 / max(workers, 1))
            # One pool per process at a time: the job threads of a server syncing
            # several repositories would otherwise start cores x threads processes.
            if workers >= 2 and saved > _WORKER_START_SECONDS and self._pool.acquire(False):
                cache.clear()  # each worker keeps its own
                try:
                    with self._blobs.scratch_dir("archives-") as scratch:
                        yield from self._in_processes(mirror, rest, workers, scratch)
                finally:
                    self._pool.release()
                return

    def _here(self, mirror: Path, key: ArchiveKey, cache: SubtreeCache) -> Built | str:
        try:
            return self.build_one(mirror, key, cache)
        except ArchiveTooLarge as exc:
            return str(exc)

    def _in_processes(
        self, mirror: Path, keys: Sequence[ArchiveKey], workers: int, scratch: Path
    ) -> Iterator[tuple[ArchiveKey, Built | str]]:
        """A worker that dies (killed, out of memory) or hangs (`_STALL_SECONDS`), or
        a pool that cannot start its processes ends the builds here, with a warning:
        the keys not yielded are built in this process when the publisher asks for
        them (publisher.py `_Archives.get`), so the sync goes on. The keys a hung
        worker was building are not: built here they would most likely hang this
        process, and the sync with it (`_timed_out`)."""
        # spawn, not fork: a server process has threads (jobs, cache watcher).
        context = multiprocessing.get_context("spawn")
        pending = iter(enumerate(keys))
        running: dict[futures.Future[_WorkerResult], tuple[ArchiveKey, Path, float]] = {}
        pool = futures.ProcessPoolExecutor(
            workers, mp_context=context, initializer=_start_worker, initargs=(os.getpid(), scratch)
        )
        stalled = False
        with pool:
            # At most two builds per worker in flight, so scratch files stay few
            # even when storing them is slower than building them.
            while True:
                while len(running) < 2 * workers and (item := next(pending, None)):
                    n, key = item
                    path = scratch / f"{n}.tar.gz"
                    args = (self._git, mirror, key, self._limits, self.builder, path)
                    try:
                        future = pool.submit(_build_file, *args)
                    except (OSError, BrokenProcessPool) as exc:  # no process could start
                        log.warning("archive workers failed (%s): building here", exc)
                        return
                    running[future] = (key, path, time.monotonic())
                if not running:
                    return
                done, _ = futures.wait(
                    running, timeout=_STALL_SECONDS, return_when=futures.FIRST_COMPLETED
                )
                if not done:
                    _kill_workers(scratch)
                    stalled = True
                    break
                for future in done:
                    key, path, started = running.pop(future)
                    try:
                        result = future.result()
                    except BrokenProcessPool as exc:  # a worker died
                        log.warning("archive workers failed (%s): building here", exc)
                        return
                    yield key, self._store(result, path, started)
        # The pool has ended, its processes with it: a scratch file now says that a
        # worker began that build (_build_file creates it first).
        if stalled:
            yield from _timed_out([key for key, path, _ in running.values() if path.exists()])

    def _store(self, result: _WorkerResult, path: Path, started: float) -> Built | str:
        if isinstance(result, str):
            return result
        with path.open("rb") as built, self._blobs.writer() as sink:
            shutil.copyfileobj(built, cast(BinaryIO, sink), 1024 * 1024)
        path.unlink()
        metrics.archive_built(time.monotonic() - started)
        assert sink.result is not None
        dir_hash, skipped = result
        return Built(sink.result.sha256, sink.result.size, skipped, dir_hash)


def _timed_out(keys: list[ArchiveKey]) -> Iterator[tuple[ArchiveKey, str]]:
    """The builds hung workers were stopped in: each fails as a too-large archive
    does (the publisher reports the reason and leaves the version unpublished, so
    the next sync builds it again), instead of being built here, where it would most
    likely hang again and hold the sync, its repository's lock and its job for good
    (a stuck repository). A build still running when the pool is
    declared stalled started before the last wait, so it ran `_STALL_SECONDS` at least."""
    log.warning(
        "archive workers stalled %.0f s: %d builds stopped, the rest built here",
        _STALL_SECONDS,
        len(keys),
    )
    reason = f"archive build did not finish within {_STALL_SECONDS:.0f} s"
    for key in keys:
        log.warning("archive of tree %s: %s", key.tree_sha[:12], reason)
        yield key, reason


def _kill_workers(scratch: Path) -> None:
    """End a pool whose workers hang: killed, the pool breaks (as when one dies) and
    its shutdown returns instead of waiting for them. Its workers are the children
    of this process whose pid they wrote into `scratch` (_start_worker): a server
    has other children (gitreg/server/cli.py), and the executor names its own
    only in a private attribute. A worker still starting, its pid not written yet,
    ends with the broken pool: the executor terminates the processes left."""
    pids = {int(found.name.removeprefix("worker-")) for found in scratch.glob("worker-*")}
    for process in multiprocessing.active_children():
        if process.pid in pids:
            process.kill()


# A worker's answer: (dirHash, what was left out), or why there is no archive.
_WorkerResult = tuple[str, tuple[str, ...]] | str


def _build_file(
    git: GitBackend,
    mirror: Path,
    key: ArchiveKey,
    limits: ArchiveLimits,
    builder: str,
    path: Path,
) -> _WorkerResult:
    """In a worker process: one archive into `path`; its dirHash and what it
    left out, or why there is none (a str: ArchiveTooLarge's message)."""
    try:
        with path.open("wb") as out:
            report = git.archive(
                mirror,
                key.tree_sha,
                out,
                key.mtime,
                limits,
                builder=builder,
                subdir=key.subdir,
                cache=_WORKER_CACHE,
            )
    except ArchiveTooLarge as exc:
        path.unlink(missing_ok=True)
        return str(exc)
    return report.dir_hash, tuple(report.skipped)


# In a worker process only: the directories of its previous build, for the next
# (gitreg/archives/cache.py). A worker builds many archives of one repository, one
# task each, and the pool gives no other place for state to live between tasks;
# the process, and the cache with it, ends with the pool at the end of the sync.
_WORKER_CACHE = SubtreeCache()


def _start_worker(parent: int, scratch: Path) -> None:
    """In a worker process: say its pid to the pool's owner (`_kill_workers`), and
    exit when the process that started it is gone (killed with SIGKILL, say),
    instead of waiting forever for work that will not come."""
    (scratch / f"worker-{os.getpid()}").touch()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()

"""Submitting work to the durable ingestion queue.

`JobQueue.submit` records a job in SQLite (one `BEGIN IMMEDIATE`
transaction); webhooks use `submit_grouped`, where one writer thread stores
every delivery waiting at that moment in one transaction (group commit: one
fsync for a storm instead of one each) and each is answered only after that
commit, so the answer never waits on git and a 2xx means stored.
Nothing here knows how a job is run: that is `gitreg.jobs.runner`.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from gitreg import logs
from gitreg.errors import GitregError, QueueUnavailable, StorageFull
from gitreg.jobs.store import Enqueued, JobIndex, JobKind, Submission
from gitreg.metrics import service as metrics
from gitreg.settings import Settings

log = logging.getLogger("gitreg.jobs")

# Submissions stored in one transaction at most: bounds how long one commit holds
# the write lock (the rest wait for the next, which starts right after).
MAX_BATCH = 500


_Waiting = tuple[list[Submission], "Future[list[Enqueued]]"]
_STOP: _Waiting = ([], Future())  # put by `close`: the writer thread ends there


class GroupCommit:
    """One writer thread that stores whatever submissions are waiting in ONE
    transaction, so a storm of deliveries costs one commit and one fsync per
    batch instead of one per delivery, all serialised on the write lock.

    Every caller's future resolves only after the commit holding its
    submissions returned (durable under the database's `synchronous` setting),
    or fails with `QueueUnavailable` when that transaction failed: then none
    of the batch was stored and every caller in it must answer 503."""

    def __init__(self, write: Callable[[list[Submission]], list[Enqueued]]) -> None:
        self._write = write
        self._waiting: queue.SimpleQueue[_Waiting] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._closed = False

    def submit(self, submissions: list[Submission]) -> Future[list[Enqueued]]:
        future: Future[list[Enqueued]] = Future()
        with self._start_lock:  # started on first use: CLI commands never need it
            if self._closed:
                future.set_exception(QueueUnavailable("the registry is shutting down"))
                return future
            self._waiting.put((submissions, future))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="gitreg-group-commit", daemon=True
                )
                self._thread.start()
        return future

    def close(self) -> None:
        """Store what is already waiting, then stop the writer thread (before
        the database it writes to is closed); later submissions fail with 503."""
        with self._start_lock:
            self._closed = True
            thread = self._thread
            self._waiting.put(_STOP)
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while True:
            batch, stop = self._take()
            if batch:
                self._commit(batch)
            if stop:
                return

    def _take(self) -> tuple[list[_Waiting], bool]:
        """Everything waiting now (blocking for the first), up to MAX_BATCH
        submissions. A caller that gave up before its turn (its request was
        cancelled) is left out: it was never answered, so it need not be stored.
        True with the batch once `close` asked the thread to stop."""
        batch: list[_Waiting] = []
        size = 0
        waiting = self._waiting.get()
        while True:
            if waiting is _STOP:
                return batch, True
            if waiting[1].set_running_or_notify_cancel():
                batch.append(waiting)
                size += len(waiting[0])
            if size >= MAX_BATCH or self._waiting.empty():
                return batch, False
            waiting = self._waiting.get_nowait()

    def _commit(self, batch: list[_Waiting]) -> None:
        try:
            stored = self._write([s for submissions, _ in batch for s in submissions])
        except Exception as exc:  # the transaction rolled back: nothing is stored
            error: GitregError
            if isinstance(exc, StorageFull):  # says what to do, with Retry-After
                log.error("could not store %d webhook submissions: %s", len(batch), exc)
                error = exc
            else:
                logs.failure(log, exc, "could not store %d webhook submissions", len(batch))
                error = QueueUnavailable(f"the delivery could not be stored, retry later: {exc}")
            for _, future in batch:
                future.set_exception(error)
            return
        for submissions, future in batch:
            future.set_result(stored[: len(submissions)])
            stored = stored[len(submissions) :]


# Submissions that put a job in the queue ("merged" ones joined a queued job).
_NEW = ("queued", "requeued")


class JobQueue:
    """Submitting work; shared by the webhook routes, the CLI and the runner."""

    def __init__(self, store: JobIndex, settings: Settings) -> None:
        self.store = store
        self._settings = settings
        # Set on every submission so idle workers in this process start at once.
        self.wakeup = threading.Event()
        self._group = GroupCommit(self._store_batch)

    def submit_grouped(self, submissions: list[Submission]) -> Future[list[Enqueued]]:
        """Like `submit` for each, in one transaction shared with whatever other
        callers submit meanwhile (the webhook routes: see `GroupCommit`)."""
        return self._group.submit(
            [dataclasses.replace(s, delivery_id=s.delivery_id[:200]) for s in submissions]
        )

    def _store_batch(self, submissions: list[Submission]) -> list[Enqueued]:
        max_attempts = self._settings.job_max_attempts
        stored = self.store.enqueue_many(submissions, time.time(), max_attempts)
        for submission, outcome in zip(submissions, stored, strict=True):
            if outcome.status in _NEW:
                metrics.job_queued(submission.kind)
        if any(s.status != "duplicate" for s in stored):
            self.wakeup.set()
        return stored

    def close(self) -> None:
        self._group.close()

    def submit(
        self, repo_id: int, kind: JobKind, source: str, reason: str, delivery_id: str = ""
    ) -> Enqueued:
        result = self.store.enqueue(
            repo_id,
            kind,
            source,
            reason,
            now=time.time(),
            max_attempts=self._settings.job_max_attempts,
            delivery_id=delivery_id[:200],
        )
        if result.status in _NEW:
            metrics.job_queued(kind)
        if result.status != "duplicate":
            self.wakeup.set()
        return result

    def retry(self, job_id: int) -> Enqueued:
        result = self.store.retry(job_id, time.time())
        self.wakeup.set()
        return result

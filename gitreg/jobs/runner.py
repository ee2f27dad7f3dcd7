"""Running the ingestion queue's jobs.

`JobRunner` threads in each server process claim jobs with a lease, hand
each repository to `SyncService.sync_repo` (which decides what the repository
feeds; the sync takes the repository's cross-process lock and is idempotent),
and retry failures with exponential backoff. A housekeeping thread renews
leases of running jobs, hands the jobs of dead workers back at once when it can
tell (same host, pid gone) and otherwise lets their leases expire, and
schedules the periodic reconcile that publishes tags no webhook announced.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from gitreg import logs
from gitreg.audit import actor as actors
from gitreg.errors import (
    GitError,
    NotFound,
    StorageFull,
    is_outage,
    storage_full,
)
from gitreg.jobs.queue import JobQueue
from gitreg.jobs.store import JobRecord
from gitreg.metrics import service as metrics
from gitreg.repositories.sync import SyncService
from gitreg.settings import Settings
from gitreg.storage.records import RepoRecord

log = logging.getLogger("gitreg.jobs")

MAX_BACKOFF = 15 * 60.0
POLL_INTERVAL = 1.0  # picks up jobs submitted by other processes
DEAD_WORKER_SCAN = 5.0
RETENTION = 14 * 86400.0  # finished jobs and delivery ids are kept this long
PRUNE_INTERVAL = 3600.0


def _as_storage_full(exc: Exception) -> StorageFull | None:
    if isinstance(exc, StorageFull):
        return exc
    return storage_full(exc, "the data dir")


def backoff(attempt: int, base: float) -> float:
    """Delay before retry number `attempt` (1-based): doubling, capped, with
    jitter so repositories that failed together do not retry in lockstep."""
    delay = min(MAX_BACKOFF, base * 2 ** max(0, attempt - 1))
    return float(delay * random.uniform(0.8, 1.2))


def _boot_id() -> str:
    with contextlib.suppress(OSError):
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return "unknown-boot"


def worker_identity() -> str:
    """`host/boot/pid/nonce`: enough to tell, on the same machine, that the
    process holding a lease is gone (the nonce tells apart a new process that
    got the same pid, as PID 1 in a restarted container does)."""
    return f"{socket.gethostname()}/{_boot_id()}/{os.getpid()}/{secrets.token_hex(4)}"


def owner_is_dead(owner: str, me: str) -> bool:
    """True only when certain; otherwise the lease simply runs out."""
    try:
        host, boot, pid_text, _ = owner.split("/")
        pid = int(pid_text)
    except ValueError:
        return False
    my_host, my_boot, my_pid, _ = me.split("/")
    if (host, boot) != (my_host, my_boot) or owner == me:
        return False
    if pid == int(my_pid):
        return True  # that pid is this process, which did not take the lease
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, as another user
    return False


class RepoRecords(Protocol):
    """Where the runner finds the repositories its jobs work on."""

    def repo(self, repo_id: int) -> RepoRecord:
        """One repository, removed ones included; `NotFound` when there is none."""
        ...

    def repos(self) -> list[RepoRecord]:
        """Registered (not removed) repositories."""
        ...


class JobRunner:
    """Runs queued jobs on `settings.job_workers` threads of this process."""

    def __init__(
        self,
        settings: Settings,
        repos: RepoRecords,
        queue: JobQueue,
        sync: SyncService,
    ) -> None:
        self._settings = settings
        self._repos = repos
        self._queue = queue
        self._store = queue.store
        self._sync = sync
        self.owner = worker_identity()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._active: set[int] = set()
        self._active_lock = threading.Lock()

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> None:
        self._reclaim_from_dead_workers()
        for number in range(self._settings.job_workers):
            self._spawn(self._work_loop, f"gitreg-job-{number}")
        self._spawn(self._housekeeping_loop, "gitreg-jobs-housekeeping")
        log.info("job runner %s started with %d workers", self.owner, self._settings.job_workers)

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop claiming; wait a little for running jobs. A job still running at
        exit keeps its lease until it expires, then another worker retries it."""
        self._stop.set()
        self._queue.wakeup.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads.clear()

    # -- working ------------------------------------------------------------

    def _work_loop(self) -> None:
        while not self._stop.is_set():
            try:
                ran = self.run_one()
            except Exception as exc:  # an outage or a broken database must not end the thread
                logs.failure(log, exc, "job worker round failed")
                ran = None
            if ran is None:
                self._queue.wakeup.wait(POLL_INTERVAL)
                self._queue.wakeup.clear()

    def run_one(self) -> JobRecord | None:
        """Claim and run one job in this thread; None when nothing is runnable."""
        job = self._store.claim(self.owner, time.time(), self._settings.job_lease)
        if job is None:
            return None
        # Another job may be waiting too: let an idle thread look for it.
        self._queue.wakeup.set()
        with self._active_lock:
            self._active.add(job.id)
        context = logs.job.set((job.id, job.repo_id))  # on every line the job logs
        metrics.job_started()
        started = time.monotonic()
        result = "failed"
        try:
            result = self._execute(job)
        finally:
            metrics.job_finished(result, time.monotonic() - started)
            logs.job.reset(context)
            with self._active_lock:
                self._active.discard(job.id)
        return self._store.job(job.id)

    def drain(self) -> list[JobRecord]:
        """Run every runnable job in this thread (`gitreg jobs run`, tests)."""
        done: list[JobRecord] = []
        while (job := self.run_one()) is not None:
            done.append(job)
        return done

    def _execute(self, job: JobRecord) -> str:
        """Run one claimed job; returns its result for the metrics: done,
        retried, failed or deferred (docs/operations.md, "Metrics")."""
        started = time.monotonic()
        try:
            # The sync's audit rows name whoever asked for the job.
            with actors.acting_as(job.actor):
                result = self._sync.sync_repo(self._repos.repo(job.repo_id), job.kind)
        except NotFound as exc:
            return self._failed(job, str(exc), retry=False)
        except GitError as exc:
            return self._failed(job, str(exc), retry=True)
        except Exception as exc:  # a bug, a full disk or an outage: keep the job
            if (full := _as_storage_full(exc)) is not None:
                self._wait_for_space(job, full)
                return "deferred"
            if is_outage(exc):  # one line from `_failed`, no traceback
                return self._failed(job, str(exc), retry=True, outage=True)
            log.exception("job %d failed unexpectedly", job.id)
            return self._failed(job, f"{type(exc).__name__}: {exc}", retry=True)
        record = json.dumps(result.as_record())
        if not self._store.finish(job.id, self.owner, time.time(), record):
            log.warning("job %d finished after its lease was lost", job.id)
        log.info("job %d done in %.2fs: %s", job.id, time.monotonic() - started, result.summary)
        return "done"

    def _wait_for_space(self, job: JobRecord, full: StorageFull) -> None:
        """A full disk is the operator's to fix, not the job's fault: the job stays
        queued however many attempts it has used, and runs again after
        `retry_after`. Nothing of it was half-written (atomic blobs and index)."""
        log.warning("job %d waits for disk space: %s", job.id, full)
        later = time.time() + full.retry_after
        try:
            if self._store.fail(job.id, self.owner, time.time(), str(full), later) == "failed":
                self._store.retry(job.id, later)  # attempts used up: queue it again
        except StorageFull:
            # Not even that could be written: the lease runs out and the job is
            # claimed again, as after a crash.
            log.warning("job %d: cannot record the failure either, the disk is full", job.id)

    def _failed(self, job: JobRecord, error: str, retry: bool, outage: bool = False) -> str:
        """Record a failed attempt and log it in one line. A job failed by an
        outage (storage unavailable) runs again at the next submission for its
        repository, so that is a warning, not an error."""
        now = time.time()
        retry_at = now + backoff(job.attempts, self._settings.job_backoff) if retry else None
        state = self._store.fail(job.id, self.owner, now, error, retry_at, outage)
        if state == "queued" and retry_at is not None:
            log.warning(
                "job %d attempt %d/%d failed, retry in %.0fs: %s",
                job.id,
                job.attempts,
                job.max_attempts,
                retry_at - now,
                error,
            )
            return "retried"
        if not outage:
            log.error("job %d %s after %d attempt(s): %s", job.id, state, job.attempts, error)
            return "failed"
        again = ", runs again at the next delivery or reconcile" if state == "failed" else ""
        log.warning(
            "job %d %s after %d attempt(s)%s: %s", job.id, state, job.attempts, again, error
        )
        return "failed"

    # -- housekeeping -------------------------------------------------------

    def _housekeeping_loop(self) -> None:
        next_renew = next_scan = next_schedule = 0.0
        while not self._stop.wait(0.5):
            now = time.monotonic()
            try:
                if now >= next_renew:
                    self._renew_leases()
                    next_renew = now + self._settings.job_lease / 3
                if now >= next_scan:
                    self._reclaim_from_dead_workers()
                    next_scan = now + DEAD_WORKER_SCAN
                if now >= next_schedule:
                    self._run_schedules()
                    next_schedule = now + POLL_INTERVAL * 5
            except Exception as exc:
                logs.failure(log, exc, "job housekeeping round failed")

    def _renew_leases(self) -> None:
        with self._active_lock:
            active = sorted(self._active)
        held = self._store.renew(self.owner, active, time.time() + self._settings.job_lease)
        for lost in set(active) - set(held):
            # Harmless (the repository lock serialises, publishing is idempotent)
            # but worth knowing: this job's lease ran out and it may run twice.
            log.warning("lease of job %d was lost while it ran", lost)

    def _reclaim_from_dead_workers(self) -> None:
        dead = [o for o in self._store.running_owners() if o and owner_is_dead(o, self.owner)]
        if dead and self._store.expire_leases(dead):
            log.warning("taking over jobs of stopped workers %s", ", ".join(dead))
            self._queue.wakeup.set()

    def _run_schedules(self) -> None:
        now = time.time()
        interval = self._settings.reconcile_interval
        if interval > 0 and self._store.claim_schedule("reconcile", now, interval):
            self.reconcile()
        # The queue's depth for /metrics, shared by every replica (gitreg_job_queue).
        metrics.job_queue(self._store.counts())
        if self._store.claim_schedule("prune", now, PRUNE_INTERVAL):
            pruned = self._store.prune(now - RETENTION)
            if pruned:
                log.info("pruned %d finished jobs", pruned)

    def reconcile(self) -> int:
        """Queue a remote-tag check for every repository; returns how many."""
        repos = self._repos.repos()
        for repo in repos:
            self._queue.submit(repo.id, "reconcile", "reconcile", "periodic reconcile")
        return len(repos)

"""What the ingestion queue needs from the index (SQL in storage/jobs.py). The
same rules as protocols.py: code outside gitreg/storage/ types against this;
each docstring states the contract an implementation keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gitreg.storage.jobs import Enqueued, JobKind, JobRecord, JobState, Submission


class JobIndex(Protocol):
    """The durable job queue shared by every process (W5, W6, S3)."""

    def enqueue(
        self,
        repo_id: int,
        kind: JobKind,
        source: str,
        reason: str,
        now: float,
        max_attempts: int,
        delivery_id: str = "",
    ) -> Enqueued:
        """`enqueue_many` for one submission."""
        ...

    def enqueue_many(
        self, submissions: Sequence[Submission], now: float, max_attempts: int
    ) -> list[Enqueued]:
        """All submissions in ONE transaction, in order: a repeated delivery id
        is a `duplicate`, a request for a repository with a queued job is
        `merged` into it (its `run_after`, a backoff wait, is kept), and one for
        a repository whose latest job `failed` by an outage `requeued` that job.
        All are stored or none is."""
        ...

    def retry(self, job_id: int, now: float) -> Enqueued:
        """Queue a failed or superseded job again; other states are left alone."""
        ...

    def claim(self, owner: str, now: float, lease: float) -> JobRecord | None:
        """Atomically lease the next runnable job to `owner`: no two callers, in
        any process, get the same job; one repository runs one job at a time."""
        ...

    def renew(self, owner: str, job_ids: list[int], until: float) -> list[int]:
        """Extend the leases `owner` still holds; the ids it still holds."""
        ...

    def finish(self, job_id: int, owner: str, now: float, result: str) -> bool:
        """Mark done; False, changing nothing, if `owner` lost the lease."""
        ...

    def fail(
        self,
        job_id: int,
        owner: str,
        now: float,
        error: str,
        retry_at: float | None,
        outage: bool = False,
    ) -> JobState | None:
        """Back to `queued` at `retry_at`, or `failed` for good (no retry_at or
        attempts used up); the new state, or None if `owner` lost the lease.
        `outage`: storage was unavailable (see `enqueue_many`)."""
        ...

    def expire_leases(self, owners: list[str]) -> int:
        """End the leases of workers known to be dead; how many ended."""
        ...

    def running_owners(self) -> list[str]: ...

    def job(self, job_id: int) -> JobRecord: ...

    def jobs(
        self, state: str | None = None, repo_id: int | None = None, limit: int = 100
    ) -> list[JobRecord]:
        """Newest first."""
        ...

    def counts(self) -> dict[str, int]:
        """Jobs per state."""
        ...

    def delivery_count(self) -> int:
        """Delivery ids remembered for deduplication."""
        ...

    def prune(self, before: float) -> int:
        """Forget finished jobs (and their delivery ids) older than `before`."""
        ...

    def claim_schedule(self, name: str, now: float, interval: float) -> bool:
        """True for exactly one caller per `interval`, across processes."""
        ...

"""What the job queue needs from the index, and the records it hands out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from gitreg.audit.actor import SYSTEM, Actor

JobKind = Literal["sync", "reconcile"]


JobState = Literal["queued", "running", "done", "failed", "superseded"]
STATES: tuple[JobState, ...] = ("queued", "running", "done", "failed", "superseded")


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


@dataclass(frozen=True)
class JobRecord:
    id: int
    repo_id: int
    kind: JobKind
    state: JobState
    source: str
    reason: str
    deliveries: int
    attempts: int
    max_attempts: int
    run_after: float
    lease_owner: str
    lease_until: float
    created_at: float
    started_at: float | None
    finished_at: float | None
    last_error: str
    result: str
    outage: bool  # its last attempt failed because storage was unavailable
    actor: Actor = SYSTEM  # who asked for it; the sync's audit rows name them

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "repo_id": self.repo_id,
            "kind": self.kind,
            "state": self.state,
            "source": self.source,
            "reason": self.reason,
            "deliveries": self.deliveries,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "run_after": iso(self.run_after),
            "created_at": iso(self.created_at),
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "last_error": self.last_error,
            "outage": self.outage,
            "result": _decoded(self.result),
            # Which replica (host/boot/pid/nonce) holds a running job's lease.
            "lease_owner": self.lease_owner or None,
        }


@dataclass(frozen=True)
class Submission:
    """One request to bring a repository up to date (a delivery, a reconcile)."""

    repo_id: int
    kind: JobKind
    source: str
    reason: str
    delivery_id: str = ""  # the forge's id; "" when there is none (no dedup)
    # Who asked: the holder of an authenticated request's credentials; a
    # webhook (signed by a forge, not a principal) and a reconcile are system.
    actor: Actor = SYSTEM


@dataclass(frozen=True)
class Enqueued:
    """What became of one submission: a new job, folded into a queued one,
    a repeat of a delivery already seen, or a failed job queued again."""

    job_id: int
    status: Literal["queued", "merged", "duplicate", "requeued"]


def _decoded(text: str) -> Any:
    """A job's result is JSON written by the runner; show it as such."""
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text


class JobIndex(Protocol):
    """The durable job queue shared by every process."""

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

"""The ingestion queue as operators see it: what `gitreg jobs` and the admin
routes ask of the jobs feature. Submitting work is `gitreg.jobs.queue`;
running it, `gitreg.jobs.runner`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gitreg.audit.service import UNRECORDED, AuditLog
from gitreg.errors import BadRequest, NotFound
from gitreg.jobs.queue import JobQueue
from gitreg.jobs.runner import JobRunner, RepoRecords
from gitreg.jobs.store import STATES, JobRecord
from gitreg.repositories.sync import SyncService
from gitreg.settings import Settings


@dataclass(frozen=True)
class JobView:
    """A job and the URL of the repository it works on (None once that is gone)."""

    job: JobRecord
    repository: str | None

    def to_json(self) -> dict[str, Any]:
        return self.job.to_json() | {"repository": self.repository}


@dataclass(frozen=True)
class JobListing:
    counts: dict[str, int]  # jobs per state, every state listed
    jobs: list[JobView]  # newest first


@dataclass(frozen=True)
class Retried:
    """What `retry` did: the failed job queued again ("requeued"), folded into
    its repository's queued job ("merged", which is `job`), or nothing, since
    the job had not failed ("duplicate")."""

    status: Literal["queued", "merged", "duplicate", "requeued"]
    job: JobView


class Jobs:
    def __init__(
        self,
        *,
        settings: Settings,
        queue: JobQueue,
        repos: RepoRecords,
        sync: SyncService,
        audit: AuditLog = UNRECORDED,
    ) -> None:
        self._audit = audit
        self._settings = settings
        self._queue = queue
        self._repos = repos
        self._sync = sync

    def listing(self, state: str | None, limit: int) -> JobListing:
        """The newest `limit` jobs, of one state if given, and the counts per
        state; BadRequest for a state that does not exist."""
        if state is not None and state not in STATES:
            raise BadRequest(f"state must be one of {', '.join(STATES)}")
        jobs = self._queue.store.jobs(state=state, limit=limit)
        return JobListing(self._queue.store.counts(), [self._view(j) for j in jobs])

    def job(self, job_id: int) -> JobView:
        """One job; NotFound when there is none."""
        return self._view(self._queue.store.job(job_id))

    def retry(self, job_id: int) -> Retried:
        """Queue a failed or superseded job again; NotFound when there is none."""
        with self._audit.recording("job.retry", f"job #{job_id}"):
            outcome = self._queue.retry(job_id)
        return Retried(outcome.status, self.job(outcome.job_id))

    def runner(self) -> JobRunner:
        """A runner for this process's jobs: `serve` starts it on its own threads."""
        return JobRunner(self._settings, self._repos, self._queue, self._sync)

    def run_due(self) -> list[JobView]:
        """Run every job that is due, one after another in this thread, until
        none is; the jobs as they ended."""
        return [self._view(j) for j in self.runner().drain()]

    def reconcile(self) -> int:
        """Queue a remote tag check for every repository; how many were queued."""
        return self.runner().reconcile()

    def _view(self, job: JobRecord) -> JobView:
        try:
            return JobView(job, self._repos.repo(job.repo_id).url)
        except NotFound:
            return JobView(job, None)

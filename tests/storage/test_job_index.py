"""Contract: the durable job queue (JobIndex, W5, W6, S3)."""

from __future__ import annotations

import pytest

from gitreg.errors import NotFound
from gitreg.jobs.store import Submission
from tests.storage.conftest import Backend

NOW = 1_700_000_000.0


def _repo(implementation: Backend, n: int = 1) -> int:
    return implementation.index.add_repo(f"https://git.example/r{n}.git", f"acme/r{n}").id


def test_enqueue_claim_finish_round_trip(implementation: Backend) -> None:
    jobs = implementation.jobs
    queued = jobs.enqueue(_repo(implementation), "sync", "test", "push", NOW, 3)
    assert queued.status == "queued"
    claimed = jobs.claim("w1", NOW, lease=60)
    assert claimed is not None and claimed.id == queued.job_id
    assert jobs.claim("w2", NOW, lease=60) is None  # leased: nobody else gets it
    assert jobs.finish(claimed.id, "w2", NOW, "") is False  # not the holder
    assert jobs.finish(claimed.id, "w1", NOW, "ok") is True
    assert jobs.job(claimed.id).state == "done"


def test_a_repeated_delivery_is_a_duplicate_and_requests_merge(implementation: Backend) -> None:
    repo_id = _repo(implementation)
    first, again, merged = implementation.jobs.enqueue_many(
        [
            Submission(repo_id, "sync", "github", "push", "d1"),
            Submission(repo_id, "sync", "github", "push", "d1"),
            Submission(repo_id, "sync", "github", "push", "d2"),
        ],
        NOW,
        3,
    )
    assert (first.status, again.status, merged.status) == ("queued", "duplicate", "merged")
    assert implementation.jobs.counts().get("queued") == 1


def test_a_failed_job_can_be_retried(implementation: Backend) -> None:
    jobs = implementation.jobs
    job_id = jobs.enqueue(_repo(implementation), "sync", "test", "x", NOW, 3).job_id
    assert jobs.claim("w1", NOW, lease=60) is not None
    assert jobs.fail(job_id, "w1", NOW, "boom", retry_at=None) == "failed"
    assert jobs.retry(job_id, NOW).status == "requeued"
    assert jobs.job(job_id).state == "queued"


def test_missing_job_raises_not_found(implementation: Backend) -> None:
    with pytest.raises(NotFound):
        implementation.jobs.job(404)


def test_a_schedule_is_claimed_once_per_interval(implementation: Backend) -> None:
    jobs = implementation.jobs
    assert jobs.claim_schedule("reconcile", NOW, 60) is True
    assert jobs.claim_schedule("reconcile", NOW + 1, 60) is False
    assert jobs.claim_schedule("reconcile", NOW + 61, 60) is True

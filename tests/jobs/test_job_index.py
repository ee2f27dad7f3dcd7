"""Contract: the durable job queue (JobIndex)."""

from __future__ import annotations

import dataclasses

import pytest

from gitreg.audit.actor import SYSTEM, Actor
from gitreg.errors import NotFound
from gitreg.jobs.store import Enqueued, Submission
from tests.support.backends import Backend

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


def _fail_first_attempt(
    implementation: Backend, retry_at: float | None, outage: bool = False
) -> tuple[int, int]:
    """A repository whose one job, from delivery "d1", failed its first attempt."""
    jobs = implementation.jobs
    repo_id = _repo(implementation)
    job_id = jobs.enqueue(repo_id, "sync", "github", "push", NOW, 8, "d1").job_id
    assert jobs.claim("w1", NOW, lease=60) is not None
    jobs.fail(job_id, "w1", NOW + 1, "blob store unavailable", retry_at, outage)
    return repo_id, job_id


def test_deliveries_do_not_cut_a_backoff_wait_short(implementation: Backend) -> None:
    jobs = implementation.jobs
    repo_id, job_id = _fail_first_attempt(implementation, retry_at=NOW + 100)
    later = NOW + 2
    redelivered, merged, reconcile = jobs.enqueue_many(
        [
            Submission(repo_id, "sync", "github", "push", "d1"),  # a redelivery
            Submission(repo_id, "sync", "github", "push again", "d2"),
            Submission(repo_id, "reconcile", "reconcile", "periodic reconcile"),
        ],
        later,
        8,
    )
    assert (redelivered.status, merged.status, reconcile.status) == (
        "duplicate",
        "merged",
        "merged",
    )
    waiting = jobs.job(job_id)
    assert (waiting.state, waiting.run_after, waiting.attempts) == ("queued", NOW + 100, 1)
    assert jobs.claim("w2", later, lease=60) is None
    assert jobs.claim("w2", NOW + 100, lease=60) is not None


@pytest.mark.parametrize(
    "submission",
    [
        Submission(0, "sync", "github", "push again", "d2"),
        Submission(0, "reconcile", "reconcile", "periodic reconcile"),
    ],
    ids=["delivery", "reconcile"],
)
def test_a_job_failed_by_an_outage_runs_again_at_the_next_submission(
    implementation: Backend, submission: Submission
) -> None:
    jobs = implementation.jobs
    repo_id, job_id = _fail_first_attempt(implementation, retry_at=None, outage=True)
    failed = jobs.job(job_id)
    assert (failed.state, failed.outage) == ("failed", True)
    later = NOW + 2
    again = jobs.enqueue_many([dataclasses.replace(submission, repo_id=repo_id)], later, 8)
    assert again == [Enqueued(job_id, "requeued")]
    queued = jobs.job(job_id)
    assert (queued.state, queued.kind, queued.attempts, queued.outage) == (
        "queued",
        "sync",
        0,
        False,
    )
    assert submission.reason in queued.reason
    claimed = jobs.claim("w2", later, lease=60)
    assert claimed is not None and claimed.id == job_id


def test_a_job_failed_otherwise_stays_failed_until_redelivered(implementation: Backend) -> None:
    jobs = implementation.jobs
    repo_id, job_id = _fail_first_attempt(implementation, retry_at=None)
    new = jobs.enqueue(repo_id, "sync", "github", "push again", NOW + 2, 8, "d2")
    assert new.status == "queued" and new.job_id != job_id
    assert jobs.job(job_id).state == "failed"
    assert jobs.claim("w2", NOW + 3, lease=60) is not None
    assert jobs.finish(new.job_id, "w2", NOW + 3, "{}")
    # A forge's redelivery of the failed delivery queues it again.
    assert jobs.enqueue(repo_id, "sync", "github", "push", NOW + 4, 8, "d1") == Enqueued(
        job_id, "requeued"
    )


ALICE = Actor("token", "token #7")
CI = Actor("workload", "https://ci.example repo:acme/infra", rule="acme publish")


def test_a_job_names_who_asked_for_it_and_defaults_to_system(implementation: Backend) -> None:
    jobs = implementation.jobs
    asked = jobs.enqueue_many(
        [Submission(_repo(implementation), "sync", "hook", "t", "", CI)], NOW, 3
    )
    plain = jobs.enqueue(_repo(implementation, 2), "reconcile", "reconcile", "periodic", NOW, 3)
    assert jobs.job(asked[0].job_id).actor == CI
    assert jobs.job(plain.job_id).actor == SYSTEM
    claimed = jobs.claim("w1", NOW, lease=60)
    assert claimed is not None and claimed.actor == CI


def test_a_folded_submission_keeps_the_first_principal(implementation: Backend) -> None:
    jobs = implementation.jobs
    repo_id = _repo(implementation)
    first, webhook, other = jobs.enqueue_many(
        [
            Submission(repo_id, "reconcile", "reconcile", "periodic reconcile"),
            Submission(repo_id, "sync", "hook", "created v1", "", ALICE),
            Submission(repo_id, "sync", "github", "push", "d1"),
        ],
        NOW,
        3,
    )
    assert (webhook.status, webhook.job_id) == ("merged", first.job_id)
    assert jobs.job(first.job_id).actor == ALICE  # a principal replaces system
    jobs.enqueue_many([Submission(repo_id, "sync", "hook", "again", "", CI)], NOW, 3)
    assert other.status == "merged"
    assert jobs.job(first.job_id).actor == ALICE  # neither a webhook nor a later principal


def test_a_superseded_job_hands_its_principal_to_the_queued_one(implementation: Backend) -> None:
    jobs = implementation.jobs
    repo_id = _repo(implementation)
    asked = jobs.enqueue_many([Submission(repo_id, "sync", "hook", "t", "", ALICE)], NOW, 3)[0]
    assert jobs.claim("w1", NOW, lease=60) is not None
    webhook = jobs.enqueue(repo_id, "sync", "github", "push", NOW, 3, "d1")
    assert webhook.status == "queued" and jobs.job(webhook.job_id).actor == SYSTEM
    state = jobs.fail(asked.job_id, "w1", NOW + 1, "fetch failed", retry_at=NOW + 10)
    assert state == "superseded"
    assert jobs.job(webhook.job_id).actor == ALICE  # the sync that covers it still names her

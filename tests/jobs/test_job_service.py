"""`Jobs`, the service behind `gitreg jobs` and the admin job routes: listings
with each job's repository, retries, and running what is due."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gitreg.errors import BadRequest, NotFound
from gitreg.services import Services
from gitreg.storage.records import RepoRecord
from tests.support.gitrepo import GitRepo, simple_module


@pytest.fixture
def svc(services_with: Callable[..., Services]) -> Services:
    return services_with(job_backoff=0, job_max_attempts=1)


def _module_repo(svc: Services, make_repo: Callable[[str], GitRepo]) -> RepoRecord:
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    record = svc.index.add_repo(str(repo.path), "acme/vpc")
    svc.index.add_module(record.id, "acme", "vpc", "aws", "", "")
    return record


def _broken_repo(svc: Services, tmp_path: Path) -> RepoRecord:
    record = svc.index.add_repo(str(tmp_path / "no-such-repo"), "acme/gone")
    svc.index.add_module(record.id, "acme", "gone", "aws", "", "")
    return record


def test_run_due_runs_every_job_and_names_its_repository(
    svc: Services, tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    good = _module_repo(svc, make_repo)
    bad = _broken_repo(svc, tmp_path)
    assert svc.jobs.reconcile() == 2
    done = {v.repository: v.job.state for v in svc.jobs.run_due()}
    assert done == {good.url: "done", bad.url: "failed"}
    assert svc.jobs.run_due() == []


def test_a_listing_counts_every_state_and_filters_by_one(
    svc: Services, tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    _module_repo(svc, make_repo)
    bad = _broken_repo(svc, tmp_path)
    svc.jobs.reconcile()
    svc.jobs.run_due()
    listing = svc.jobs.listing(None, 10)
    assert listing.counts == {"queued": 0, "running": 0, "done": 1, "failed": 1, "superseded": 0}
    [failed] = svc.jobs.listing("failed", 10).jobs
    assert failed.repository == bad.url
    assert failed.to_json()["repository"] == bad.url
    assert failed.to_json()["id"] == failed.job.id
    assert len(svc.jobs.listing(None, 1).jobs) == 1
    with pytest.raises(BadRequest, match="state must be one of"):
        svc.jobs.listing("lost", 10)


def test_a_retry_queues_a_failed_job_again_and_leaves_others(
    svc: Services, tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    _module_repo(svc, make_repo)
    _broken_repo(svc, tmp_path)
    svc.jobs.reconcile()
    ended = {v.job.state: v.job.id for v in svc.jobs.run_due()}
    retried = svc.jobs.retry(ended["failed"])
    assert (retried.status, retried.job.job.state) == ("requeued", "queued")
    assert svc.jobs.retry(ended["done"]).status == "duplicate"
    with pytest.raises(NotFound):
        svc.jobs.retry(999)
    with pytest.raises(NotFound):
        svc.jobs.job(999)

"""The ingestion queue while storage is away: S3 (moto, stopped) and PostgreSQL
(the test server, stopped). Deliveries do not spend a waiting job's attempts, a
job failed by an outage runs again at the next delivery or reconcile, and an
outage is logged as one warning line per failed attempt, never a traceback."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gitreg.errors import DatabaseUnavailable, QueueUnavailable
from gitreg.jobs.runner import JobRunner
from gitreg.jobs.store import JobKind, JobRecord, Submission
from gitreg.repositories.sync import RepoSync, SyncService
from gitreg.services import Services, build_services
from gitreg.settings import load_settings
from gitreg.storage.records import RepoRecord
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.postgres import Database, PostgresServer
from tests.support.s3 import MotoS3, moto_s3, new_bucket


@pytest.fixture
def s3_outage() -> Iterator[MotoS3]:
    """A moto server of this test's own, which the test stops and starts."""
    moto = moto_s3()
    yield moto
    moto.stop()


@pytest.fixture
def on_postgresql(postgres_database: Database, tmp_path: Path) -> dict[str, Any]:
    """The settings of a registry whose index is the test's PostgreSQL database."""
    key = tmp_path / "secret.key"
    key.write_text(os.urandom(32).hex())
    key.chmod(0o600)
    return {"database_url": postgres_database.url, "secret_key_file": key}


@pytest.fixture(params=["sqlite", "postgresql"])
def index_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The settings of the index the test's registry uses: each engine."""
    if request.param == "sqlite":
        return {}
    settings: dict[str, Any] = request.getfixturevalue("on_postgresql")
    return settings


def registry(tmp_path: Path, **settings: Any) -> Services:
    return build_services(
        load_settings(
            {"data_dir": tmp_path / "data", "reconcile_interval": 0, **settings},
            environ={"GITREG_S3_ADDRESSING": "path"},
        )
    )


@pytest.fixture
def on_s3(
    s3_outage: MotoS3,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    index_settings: dict[str, Any],
) -> Iterator[Callable[..., Services]]:
    """A registry on a bucket of `s3_outage`, with the given job settings."""
    bucket = new_bucket(s3_outage, monkeypatch)
    built: list[Services] = []

    def make(**settings: Any) -> Services:
        built.append(registry(tmp_path, blob_store=bucket.url, **index_settings, **settings))
        return built[-1]

    yield make
    for services in built:
        services.close()


def module_repo(svc: Services, make_repo: Callable[[str], GitRepo]) -> RepoRecord:
    repo = make_repo("a")
    simple_module(repo, output="a")
    repo.commit()
    repo.tag("v1.0.0")
    record = svc.index.add_repo(str(repo.path), "acme/a")
    svc.index.add_module(record.id, "acme", "a", "null", "", "")
    return record


def published(svc: Services) -> list[str]:
    module = svc.index.find_module("acme", "a", "null")
    assert module is not None
    return [v.version for v in svc.index.versions(module.id)]


def warnings_and_worse(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger and r.levelno >= logging.WARNING]


def assert_no_error_and_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    worse = [
        f"{r.levelname} {r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.ERROR or r.exc_info
    ]
    assert worse == []


# -- retries (S3 cut) ----------------------------------------------------------


def test_deliveries_during_an_outage_spend_no_attempts(
    on_s3: Callable[..., Services], s3_outage: MotoS3, make_repo: Any
) -> None:
    svc = on_s3(job_backoff=60)
    record = module_repo(svc, make_repo)
    work = svc.job_runner()
    s3_outage.stop()
    svc.job_queue.submit(record.id, "sync", "github", "push v1.0.0", "d1")
    [waiting] = work.drain()
    assert (waiting.state, waiting.attempts, waiting.outage) == ("queued", 1, True)
    for number in range(2, 7):
        new = svc.job_queue.submit(record.id, "sync", "github", f"push {number}", f"d{number}")
        again = svc.job_queue.submit(record.id, "sync", "github", "push v1.0.0", "d1")
        assert (new.status, again.status) == ("merged", "duplicate")
        assert work.drain() == []
    job = svc.job_queue.store.job(waiting.id)
    assert (job.state, job.attempts, job.run_after) == ("queued", 1, waiting.run_after)
    assert job.deliveries == 6


def test_a_job_failed_by_an_outage_runs_again_at_the_next_delivery(
    on_s3: Callable[..., Services], s3_outage: MotoS3, make_repo: Any
) -> None:
    svc = on_s3(job_max_attempts=1)
    record = module_repo(svc, make_repo)
    work = svc.job_runner()
    s3_outage.stop()
    svc.job_queue.submit(record.id, "sync", "github", "push v1.0.0", "d1")
    [failed] = work.drain()
    assert (failed.state, failed.outage) == ("failed", True)
    s3_outage.start()
    assert (
        svc.job_queue.submit(record.id, "sync", "github", "push v1.1.0", "d2").status == "requeued"
    )
    [done] = work.drain()
    assert (done.id, done.state, done.attempts) == (failed.id, "done", 1)
    assert published(svc) == ["1.0.0"]


def test_a_job_failed_by_an_outage_runs_again_at_the_next_reconcile(
    on_s3: Callable[..., Services], s3_outage: MotoS3, make_repo: Any
) -> None:
    svc = on_s3(job_max_attempts=1)
    module_repo(svc, make_repo)
    work = svc.job_runner()
    s3_outage.stop()
    assert work.reconcile() == 1  # a first check: the mirror fetches v1.0.0
    [failed] = work.drain()
    assert (failed.state, failed.outage) == ("failed", True)
    s3_outage.start()
    # The mirror already holds v1.0.0, so a remote-tag check alone would see
    # nothing new: the failed job runs again, as the sync it was.
    assert work.reconcile() == 1
    [done] = work.drain()
    assert (done.id, done.state) == (failed.id, "done")
    assert published(svc) == ["1.0.0"]


def test_a_reconcile_retried_after_an_outage_publishes_what_it_fetched(
    on_s3: Callable[..., Services], s3_outage: MotoS3, make_repo: Any
) -> None:
    svc = on_s3(job_backoff=0)
    module_repo(svc, make_repo)
    work = svc.job_runner()
    s3_outage.stop()
    work.reconcile()
    job = work.run_one()  # fetched v1.0.0 into the mirror, could not publish it
    assert job is not None and (job.state, job.kind) == ("queued", "reconcile")
    s3_outage.start()
    [done] = work.drain()
    assert (done.id, done.state, done.kind, done.attempts) == (job.id, "done", "sync", 2)
    assert published(svc) == ["1.0.0"]


# -- logging -------------------------------------------------------------------


def test_an_s3_outage_is_one_warning_line_per_failed_attempt(
    on_s3: Callable[..., Services],
    s3_outage: MotoS3,
    make_repo: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    svc = on_s3(job_max_attempts=2, job_backoff=0)
    record = module_repo(svc, make_repo)
    s3_outage.stop()
    caplog.set_level(logging.INFO)
    svc.job_queue.submit(record.id, "sync", "github", "push v1.0.0", "d1")
    assert [j.state for j in svc.job_runner().drain()] == ["queued", "failed"]
    lines = warnings_and_worse(caplog, "gitreg.jobs")
    assert [(r.levelname, r.exc_info) for r in lines] == [("WARNING", None)] * 2
    first, last = (r.getMessage() for r in lines)
    assert "attempt 1/2 failed" in first and "blob store unavailable" in first
    assert "failed after 2 attempt(s), runs again at the next delivery" in last
    assert_no_error_and_no_traceback(caplog)


class Broken(SyncService):
    """A sync with a bug in it."""

    def sync_repo(self, repo: RepoRecord, reason: JobKind) -> RepoSync:
        raise RuntimeError("a bug")


def test_a_bug_in_a_job_is_still_an_error_with_its_traceback(
    tmp_path: Path, make_repo: Any, caplog: pytest.LogCaptureFixture
) -> None:
    svc = registry(tmp_path, job_max_attempts=1)
    try:
        record = module_repo(svc, make_repo)
        svc.job_queue.submit(record.id, "sync", "github", "push v1.0.0", "d1")
        caplog.set_level(logging.INFO)
        work = JobRunner(svc.settings, svc.index, svc.job_queue, Broken(svc.index, svc.publisher))
        [job] = work.drain()
        assert (job.state, job.outage) == ("failed", False)
    finally:
        svc.close()
    lines = warnings_and_worse(caplog, "gitreg.jobs")
    assert [(r.levelname, r.getMessage(), r.exc_info is not None) for r in lines] == [
        ("ERROR", f"job {job.id} failed unexpectedly", True),
        ("ERROR", f"job {job.id} failed after 1 attempt(s): RuntimeError: a bug", False),
    ]


class StopsTheDatabase(SyncService):
    """A sync during which PostgreSQL stops (once): the job's own queries and
    the record of its failure both meet the outage."""

    def __init__(self, svc: Services, server: PostgresServer) -> None:
        super().__init__(svc.index, svc.publisher)
        self._server = server
        self.stopped = False

    def sync_repo(self, repo: RepoRecord, reason: JobKind) -> RepoSync:
        if not self.stopped:
            self.stopped = True
            self._server.stop()
        return super().sync_repo(repo, reason)


def run_when_the_database_is_back(work: JobRunner) -> JobRecord:
    """Run the job once its lease ran out, as the worker loop would: that loop
    retries while the connection pool reconnects."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(DatabaseUnavailable):
            if (job := work.run_one()) is not None:
                return job
        time.sleep(0.2)
    raise AssertionError("the job did not run again once the database was back")


def test_a_database_outage_during_a_job_logs_no_traceback(
    postgres_server: PostgresServer,
    on_postgresql: dict[str, Any],
    tmp_path: Path,
    make_repo: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    svc = registry(tmp_path, job_lease=1, **on_postgresql)
    try:
        record = module_repo(svc, make_repo)
        svc.job_queue.submit(record.id, "sync", "github", "push v1.0.0", "d1")
        work = JobRunner(
            svc.settings, svc.index, svc.job_queue, StopsTheDatabase(svc, postgres_server)
        )
        caplog.set_level(logging.INFO)
        try:
            # Not even the failure can be recorded: the worker loop reports that
            # in its one line, and the job's lease runs out.
            with pytest.raises(DatabaseUnavailable):
                work.run_one()
        finally:
            postgres_server.start()
        assert warnings_and_worse(caplog, "gitreg.jobs") == []
        assert_no_error_and_no_traceback(caplog)
        job = run_when_the_database_is_back(work)
        assert (job.state, job.attempts) == ("done", 2)
    finally:
        svc.close()


def test_deliveries_the_database_cannot_store_are_one_warning_line(
    postgres_server: PostgresServer,
    on_postgresql: dict[str, Any],
    tmp_path: Path,
    make_repo: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    svc = registry(tmp_path, **on_postgresql)
    try:
        record = module_repo(svc, make_repo)
        caplog.set_level(logging.INFO)
        with postgres_server.down():
            stored = svc.job_queue.submit_grouped(
                [Submission(record.id, "sync", "github", "push", "d1")]
            )
            with pytest.raises(QueueUnavailable):
                stored.result(timeout=60)
        [line] = warnings_and_worse(caplog, "gitreg.jobs")
        assert (line.levelname, line.exc_info) == ("WARNING", None)
        assert "could not store 1 webhook submissions" in line.getMessage()
        assert_no_error_and_no_traceback(caplog)
    finally:
        svc.close()

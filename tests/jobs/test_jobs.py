"""The ingestion queue: leases, retries, one job per repository, reconcile."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitreg.jobs.runner import JobRunner, backoff, owner_is_dead, worker_identity
from gitreg.jobs.store import JobIndex
from gitreg.services import Services, build_services
from gitreg.settings import load_settings
from gitreg.storage.index import SQLiteIndex
from gitreg.storage.records import RepoRecord
from tests.support.gitrepo import GitRepo, simple_module

LEASE = 30.0


@pytest.fixture
def svc(services_with: Callable[..., Services]) -> Services:
    return services_with(job_backoff=0, job_max_attempts=3)


def add_repo(
    svc: Services, make_repo: Callable[[str], GitRepo], name: str
) -> tuple[GitRepo, RepoRecord]:
    repo = make_repo(name)
    simple_module(repo, output=name)
    repo.commit()
    repo.tag("v1.0.0")
    record = svc.index.add_repo(str(repo.path), f"acme/{name}")
    svc.index.add_module(record.id, "acme", name, "null", "", "")
    return repo, record


def runner(svc: Services) -> JobRunner:
    return svc.job_runner()


def store(svc: Services) -> JobIndex:
    return svc.job_queue.store


def versions(svc: Services, name: str) -> list[str]:
    module = svc.index.find_module("acme", name, "null")
    assert module is not None
    return sorted(v.version for v in svc.index.versions(module.id) if not v.yanked)


# -- submitting --------------------------------------------------------------


def test_submissions_for_one_repository_share_one_queued_job(svc: Services, make_repo: Any) -> None:
    _, record = add_repo(svc, make_repo, "a")
    first = svc.job_queue.submit(record.id, "reconcile", "reconcile", "periodic reconcile")
    second = svc.job_queue.submit(record.id, "sync", "github", "github push: created v1.0.0", "d1")
    third = svc.job_queue.submit(record.id, "sync", "gitlab", "gitlab push: created v1.0.1", "d2")
    assert (first.status, second.status, third.status) == ("queued", "merged", "merged")
    [job] = store(svc).jobs()
    # A sync covers the reconcile it was folded into.
    assert job.kind == "sync"
    assert job.deliveries == 2
    assert "v1.0.1" in job.reason and "periodic reconcile" in job.reason


def test_same_delivery_id_is_recorded_once(svc: Services, make_repo: Any) -> None:
    _, record = add_repo(svc, make_repo, "a")
    assert svc.job_queue.submit(record.id, "sync", "github", "x", "same").status == "queued"
    assert svc.job_queue.submit(record.id, "sync", "github", "x", "same").status == "duplicate"
    # The id is per forge: another forge's delivery with that id is another delivery.
    assert svc.job_queue.submit(record.id, "sync", "gitea", "x", "same").status == "merged"
    assert store(svc).delivery_count() == 2


def test_a_delivery_while_its_repository_runs_queues_a_second_job(
    svc: Services, make_repo: Any
) -> None:
    _, record = add_repo(svc, make_repo, "a")
    svc.job_queue.submit(record.id, "sync", "github", "first", "d1")
    running = store(svc).claim("w1", time.time(), LEASE)
    assert running is not None
    assert svc.job_queue.submit(record.id, "sync", "github", "second", "d2").status == "queued"
    assert [j.state for j in store(svc).jobs()] == ["queued", "running"]


# -- claiming ----------------------------------------------------------------


def test_one_job_per_repository_at_a_time(svc: Services, make_repo: Any) -> None:
    _, a = add_repo(svc, make_repo, "a")
    _, b = add_repo(svc, make_repo, "b")
    svc.job_queue.submit(a.id, "sync", "test", "a1")
    first = store(svc).claim("w1", time.time(), LEASE)
    svc.job_queue.submit(a.id, "sync", "test", "a2")
    svc.job_queue.submit(b.id, "sync", "test", "b1")
    now = time.time()
    second = store(svc).claim("w2", now, LEASE)
    assert first is not None and first.repo_id == a.id
    assert second is not None and second.repo_id == b.id
    # a2 waits for a1's worker even though it is due.
    assert store(svc).claim("w3", now, LEASE) is None
    assert store(svc).finish(first.id, "w1", now, "{}")
    third = store(svc).claim("w3", now, LEASE)
    assert third is not None and third.reason == "a2"


def test_expired_lease_is_taken_over_and_counted(svc: Services, make_repo: Any) -> None:
    _, record = add_repo(svc, make_repo, "a")
    svc.job_queue.submit(record.id, "sync", "test", "x")
    now = time.time()
    job = store(svc).claim("dead-worker", now, LEASE)
    assert job is not None
    assert store(svc).claim("w2", now + LEASE / 2, LEASE) is None
    taken = store(svc).claim("w2", now + LEASE + 1, LEASE)
    assert taken is not None and taken.id == job.id and taken.attempts == 2
    # The first worker lost its lease: it can neither finish nor fail the job.
    assert not store(svc).finish(job.id, "dead-worker", now, "{}")
    assert store(svc).fail(job.id, "dead-worker", now, "boom", None) is None
    assert store(svc).finish(job.id, "w2", now, "{}")


def test_a_job_whose_workers_keep_dying_fails_for_good(svc: Services, make_repo: Any) -> None:
    _, record = add_repo(svc, make_repo, "a")
    svc.job_queue.submit(record.id, "sync", "test", "x")
    now = time.time()
    for attempt in range(3):
        assert store(svc).claim(f"w{attempt}", now + attempt * (LEASE + 1), LEASE) is not None
    assert store(svc).claim("w9", now + 3 * (LEASE + 1), LEASE) is None
    [job] = store(svc).jobs()
    assert job.state == "failed"
    assert "worker lost" in job.last_error


def test_renew_keeps_a_long_job_leased(svc: Services, make_repo: Any) -> None:
    _, record = add_repo(svc, make_repo, "a")
    svc.job_queue.submit(record.id, "sync", "test", "x")
    now = time.time()
    job = store(svc).claim("w1", now, LEASE)
    assert job is not None
    assert store(svc).renew("w1", [job.id], now + 3 * LEASE) == [job.id]
    assert store(svc).claim("w2", now + 2 * LEASE, LEASE) is None
    assert store(svc).renew("someone-else", [job.id], now + 9 * LEASE) == []


# -- running -----------------------------------------------------------------


def test_drain_publishes(svc: Services, make_repo: Any) -> None:
    _, record = add_repo(svc, make_repo, "a")
    svc.job_queue.submit(record.id, "sync", "test", "x")
    [job] = runner(svc).drain()
    assert job.state == "done" and job.attempts == 1
    assert job.to_json()["result"]["published"] == ["acme/a/null 1.0.0"]
    assert versions(svc, "a") == ["1.0.0"]


def test_unreachable_remote_is_retried_then_failed_with_its_error(
    svc: Services, make_repo: Any
) -> None:
    repo, record = add_repo(svc, make_repo, "a")
    repo.path.rename(repo.path.with_name("elsewhere"))
    svc.job_queue.submit(record.id, "sync", "test", "x")
    attempts = runner(svc).drain()
    assert [j.state for j in attempts] == ["queued", "queued", "failed"]
    assert all("cannot fetch" in j.last_error for j in attempts)
    assert svc.index.repo(record.id).last_fetch_error


def test_failed_attempts_back_off(tmp_path: Path, make_repo: Any) -> None:
    settings = load_settings({"data_dir": tmp_path / "d", "job_backoff": 60}, environ={})
    services = build_services(settings)
    try:
        repo, record = add_repo(services, make_repo, "a")
        repo.path.rename(repo.path.with_name("elsewhere"))
        services.job_queue.submit(record.id, "sync", "test", "x")
        before = time.time()
        [job] = runner(services).drain()  # the retry is not due yet
        assert job.state == "queued" and job.attempts == 1
        assert before + 60 * 0.8 <= job.run_after <= time.time() + 60 * 1.2
        # A new delivery joins the waiting job without cutting its wait short.
        assert services.job_queue.submit(record.id, "sync", "test", "y").status == "merged"
        assert runner(services).drain() == []
        assert store(services).job(job.id).run_after == job.run_after
    finally:
        services.close()


def test_backoff_doubles_and_is_capped() -> None:
    delays = [backoff(n, 5.0) for n in (1, 2, 3, 20)]
    assert 4 <= delays[0] <= 6 and 8 <= delays[1] <= 12 and 16 <= delays[2] <= 24
    assert delays[3] <= 15 * 60 * 1.2


def test_failed_job_with_a_newer_queued_job_is_superseded(svc: Services, make_repo: Any) -> None:
    _, record = add_repo(svc, make_repo, "a")
    svc.job_queue.submit(record.id, "sync", "test", "first")
    job = store(svc).claim("w1", time.time(), LEASE)
    assert job is not None
    svc.job_queue.submit(record.id, "sync", "test", "second")
    state = store(svc).fail(job.id, "w1", time.time(), "remote down", time.time())
    assert state == "superseded"
    [newer, old] = store(svc).jobs()
    assert (newer.state, old.state) == ("queued", "superseded")


def test_retry_requeues_a_failed_job(svc: Services, make_repo: Any) -> None:
    repo, record = add_repo(svc, make_repo, "a")
    hidden = repo.path.with_name("elsewhere")
    repo.path.rename(hidden)
    svc.job_queue.submit(record.id, "sync", "test", "x")
    runner(svc).drain()
    [failed] = store(svc).jobs(state="failed")
    hidden.rename(repo.path)
    assert svc.job_queue.retry(failed.id).status == "requeued"
    [done] = runner(svc).drain()
    assert (done.id, done.state, done.attempts) == (failed.id, "done", 1)
    assert svc.job_queue.retry(failed.id).status == "duplicate"


def test_a_repository_removed_from_the_index_fails_without_retries(
    svc: Services, make_repo: Any
) -> None:
    _, record = add_repo(svc, make_repo, "a")
    svc.job_queue.submit(record.id, "sync", "test", "x")
    assert isinstance(svc.index, SQLiteIndex)  # the default settings: the embedded index
    svc.index._conn.execute("PRAGMA foreign_keys = OFF")
    svc.index._conn.execute("DELETE FROM modules")
    svc.index._conn.execute("DELETE FROM repos")
    [job] = runner(svc).drain()
    assert job.state == "failed" and job.attempts == 1


# -- reconcile ---------------------------------------------------------------


def test_reconcile_publishes_tags_no_webhook_announced(svc: Services, make_repo: Any) -> None:
    repo, record = add_repo(svc, make_repo, "a")
    svc.publisher.sync_repo(record)
    # GitHub and GitLab send no webhook for a push of more than three tags.
    for minor in range(1, 6):
        repo.tag(f"v1.{minor}.0")
    assert runner(svc).reconcile() == 1
    [job] = runner(svc).drain()
    assert job.kind == "reconcile" and job.state == "done"
    assert versions(svc, "a") == [f"1.{m}.0" for m in range(6)]


def test_reconcile_of_an_unchanged_remote_does_not_fetch(svc: Services, make_repo: Any) -> None:
    _, record = add_repo(svc, make_repo, "a")
    svc.publisher.sync_repo(record)
    fetched_at = svc.index.repo(record.id).last_fetch_at
    time.sleep(1.1)  # last_fetch_at has one-second resolution
    runner(svc).reconcile()
    [job] = runner(svc).drain()
    assert job.to_json()["result"]["summary"].endswith("remote tags unchanged")
    assert svc.index.repo(record.id).last_fetch_at == fetched_at


def test_reconcile_notices_deleted_and_moved_tags(svc: Services, make_repo: Any) -> None:
    repo, record = add_repo(svc, make_repo, "a")
    svc.publisher.sync_repo(record)
    repo.commit("more")
    repo.tag("v1.0.0", force=True)
    assert svc.publisher.remote_has_changes(record)
    svc.publisher.sync_repo(record)
    assert not svc.publisher.remote_has_changes(record)
    repo.delete_tag("v1.0.0")
    assert svc.publisher.remote_has_changes(record)


def test_schedules_fire_once_per_interval_across_callers(svc: Services) -> None:
    now = time.time()
    assert store(svc).claim_schedule("reconcile", now, 60)
    assert not store(svc).claim_schedule("reconcile", now + 1, 60)
    assert store(svc).claim_schedule("reconcile", now + 61, 60)


def test_prune_forgets_old_finished_jobs(svc: Services, make_repo: Any) -> None:
    _, record = add_repo(svc, make_repo, "a")
    svc.job_queue.submit(record.id, "sync", "test", "x", "delivery-1")
    runner(svc).drain()
    assert store(svc).prune(time.time() - 3600) == 0
    assert store(svc).prune(time.time() + 1) == 1
    assert store(svc).jobs() == [] and store(svc).delivery_count() == 0


# -- workers -----------------------------------------------------------------


def test_worker_threads_pick_up_submissions(tmp_path: Path, make_repo: Any) -> None:
    settings = load_settings(
        {"data_dir": tmp_path / "d", "job_workers": 2, "reconcile_interval": 0}, environ={}
    )
    services = build_services(settings)
    work = runner(services)
    work.start()
    try:
        records = [add_repo(services, make_repo, name)[1] for name in ("a", "b", "c")]
        for record in records:
            services.job_queue.submit(record.id, "sync", "test", "x")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and store(services).counts()["done"] < 3:
            time.sleep(0.05)
        assert store(services).counts()["done"] == 3
    finally:
        work.stop()
        services.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("gitreg-job")]


def test_dead_local_workers_are_recognised() -> None:
    me = worker_identity()
    host, boot, _, _ = me.split("/")
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(finished.stdout)
    assert owner_is_dead(f"{host}/{boot}/{dead_pid}/abcd", me)
    assert not owner_is_dead(f"{host}/{boot}/{os.getppid()}/abcd", me)  # alive
    assert owner_is_dead(f"{host}/{boot}/{os.getpid()}/other", me)  # my pid, not my lease
    assert not owner_is_dead(me, me)
    assert not owner_is_dead(f"other-host/{boot}/{dead_pid}/abcd", me)
    assert not owner_is_dead("garbage", me)


def test_jobs_of_a_dead_worker_run_without_waiting_for_the_lease(
    svc: Services, make_repo: Any
) -> None:
    _, record = add_repo(svc, make_repo, "a")
    svc.job_queue.submit(record.id, "sync", "test", "x")
    me = worker_identity()
    host, boot, _, _ = me.split("/")
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    store(svc).claim(f"{host}/{boot}/{int(gone.stdout)}/dead", time.time(), 3600)
    work = runner(svc)
    work._reclaim_from_dead_workers()
    [job] = work.drain()
    assert job.state == "done" and job.attempts == 2


# -- command line ------------------------------------------------------------


def test_jobs_commands(tmp_path: Path, make_repo: Any) -> None:
    from tests.support.server import cli

    data = tmp_path / "cli-data"
    repo = make_repo("cli")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    cli(data, "repo", "add", str(repo.path), "--module", "acme/cli/null", "--no-sync")
    assert cli(data, "jobs").stdout.startswith("no jobs")
    assert "queued a remote tag check for 1 repositories" in cli(data, "jobs", "reconcile").stdout
    ran = cli(data, "jobs", "run").stdout
    assert "done" in ran and "reconcile" in ran
    listing = cli(data, "jobs", "list", "--state", "done", "--json").stdout
    assert '"published": [\n' in listing and "acme/cli/null 1.0.0" in listing
    assert cli(data, "jobs", "retry", "1", check=False).returncode == 1  # not failed


@pytest.mark.parametrize(
    "flags",
    [
        {"job_workers": -1},
        {"job_lease": 0},
        {"job_max_attempts": 0},
        {"webhook_max_bytes": 10},
        {"auto_register_owners": "acme"},
        {"auto_register_owners": "acme", "auto_register_remote": "https://x/{forge_repo}/{x}"},
    ],
)
def test_bad_job_settings_stop_start_up(tmp_path: Path, flags: dict[str, Any]) -> None:
    from gitreg.errors import ConfigError

    with pytest.raises(ConfigError):
        load_settings({"data_dir": tmp_path, **flags}, environ={})

"""What PostgreSQL must add over SQLite when several replicas share it:
migrations once, a refusal on a newer schema, changes seen everywhere within
a second, and each job claimed by exactly one replica."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import gitreg.storage.postgres  # noqa: F401  (installs the pool log filter the last test checks)
from gitreg.errors import ConfigError, DatabaseUnavailable
from gitreg.jobs.store import Submission
from gitreg.jobs.store_sql import JobStore
from gitreg.storage.index import Index, open_index
from gitreg.storage.migrations import names as migration_names

NOW = 1_700_000_000.0


@pytest.fixture
def replicas(postgres_url: str, tmp_path: Path) -> Iterator[Callable[[], Index]]:
    """Opens indexes on one fresh database, as replicas would; closes them all."""
    opened: list[Index] = []

    def open_one() -> Index:
        index = open_index(postgres_url, tmp_path / "unused.sqlite3")
        opened.append(index)
        return index

    yield open_one
    for index in opened:
        index.close()


def _wait_until(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def test_migrations_run_once_when_replicas_start_together(
    replicas: Callable[[], Index], postgres_url: str
) -> None:
    errors: list[BaseException] = []

    def start() -> None:
        try:
            replicas()
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with psycopg.connect(postgres_url) as conn:
        names = [row[0] for row in conn.execute("SELECT name FROM migrations")]
    assert sorted(names) == sorted(migration_names())


def test_a_replica_on_an_older_schema_refuses_to_start(
    replicas: Callable[[], Index], postgres_url: str
) -> None:
    replicas()
    with psycopg.connect(postgres_url) as conn:
        conn.execute("INSERT INTO migrations (name, applied_at) VALUES ('9999-future', 'now')")
    with pytest.raises(ConfigError, match=r"newer schema.*9999-future") as refused:
        replicas()
    assert "upgrade gitreg" in str(refused.value)


def test_a_change_on_one_replica_is_seen_by_another_within_a_second(
    replicas: Callable[[], Index],
) -> None:
    writer, reader = replicas(), replicas()
    assert _wait_until(lambda: reader.data_version() > 0, 5)  # its feed is listening
    before = reader.data_version()
    writer.add_repo("https://git.example/vpc.git", "acme/vpc")
    assert _wait_until(lambda: reader.data_version() != before, 1.0)


def test_queue_traffic_does_not_invalidate_other_replicas(
    replicas: Callable[[], Index],
) -> None:
    writer, reader = replicas(), replicas()
    repo_id = writer.add_repo("https://git.example/vpc.git", "acme/vpc").id
    time.sleep(1.2)  # the add_repo above has been seen
    before = reader.data_version()
    JobStore(writer).enqueue(repo_id, "sync", "test", "push", NOW, 3)
    time.sleep(1.2)
    assert reader.data_version() == before


def test_a_change_without_a_notification_is_still_seen_by_polling(
    replicas: Callable[[], Index], postgres_url: str
) -> None:
    reader = replicas()
    assert _wait_until(lambda: reader.data_version() > 0, 5)
    time.sleep(0.6)
    before = reader.data_version()
    with psycopg.connect(postgres_url) as conn:  # as through a pooler that drops NOTIFY
        conn.execute("UPDATE gitreg_changes SET seq = seq + 1")
    assert _wait_until(lambda: reader.data_version() != before, 1.0)


def test_each_job_is_claimed_by_exactly_one_replica(replicas: Callable[[], Index]) -> None:
    first = replicas()
    repos = [first.add_repo(f"https://git.example/r{n}.git", f"acme/r{n}").id for n in range(40)]
    JobStore(first).enqueue_many(
        [Submission(repo_id, "sync", "test", "push") for repo_id in repos], NOW, 3
    )
    stores = [JobStore(first), JobStore(replicas()), JobStore(replicas())]
    claims: list[int] = []
    lock = threading.Lock()

    def work(store: JobStore, owner: str) -> None:
        while (job := store.claim(owner, NOW, lease=60)) is not None:
            with lock:
                claims.append(job.id)

    threads = [
        threading.Thread(target=work, args=(store, f"replica{n}/{t}"))
        for n, store in enumerate(stores)
        for t in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(claims) == 40
    assert max(Counter(claims).values()) == 1


def test_a_repository_runs_one_job_at_a_time_across_replicas(
    replicas: Callable[[], Index],
) -> None:
    first, second = replicas(), replicas()
    repo_id = first.add_repo("https://git.example/vpc.git", "acme/vpc").id
    jobs_a, jobs_b = JobStore(first), JobStore(second)
    jobs_a.enqueue(repo_id, "sync", "test", "push", NOW, 3)
    running = jobs_a.claim("a", NOW, lease=60)
    assert running is not None
    jobs_b.enqueue(repo_id, "sync", "test", "push again", NOW, 3)  # a new queued job
    assert jobs_b.claim("b", NOW, lease=60) is None  # its repository is busy
    # The lease runs out (the replica was killed): another replica takes over.
    taken = jobs_b.claim("b", NOW + 61, lease=60)
    assert taken is not None


def test_an_unreachable_or_refusing_database_is_unavailable_without_its_password(
    postgres_url: str, tmp_path: Path
) -> None:
    wrong = postgres_url.replace("gitreg:", "gitreg:not-the-password-", 1)
    assert wrong != postgres_url
    with pytest.raises(DatabaseUnavailable) as refused:
        open_index(wrong, tmp_path / "unused.sqlite3")
    assert "not-the-password" not in str(refused.value)
    assert "gitreg:***@" in str(refused.value)
    assert refused.value.status == 503 and refused.value.retry_after > 0


def test_a_url_that_is_not_postgresql_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="postgresql://"):
        open_index("mysql://u:p@h/db", tmp_path / "unused.sqlite3")


def test_the_pool_says_it_cannot_connect_once_a_minute_not_per_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pool_log = logging.getLogger("psycopg.pool")
    with caplog.at_level(logging.WARNING, logger="psycopg.pool"):
        for attempt in range(5):
            pool_log.warning("error connecting in %r: %s", "gitreg", f"refused {attempt}")
        pool_log.warning("connection returned in bad state")
    said = [r.getMessage() for r in caplog.records if r.name == "psycopg.pool"]
    assert len([m for m in said if m.startswith("error connecting")]) <= 1
    assert "connection returned in bad state" in said

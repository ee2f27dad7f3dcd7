"""A storm of deliveries at a real `gitreg serve`.

Deliveries waiting to be stored share one transaction (group commit,
`gitreg.jobs.queue.GroupCommit`); each is answered only after the commit that holds
it. These tests check what that must never break, without timing anything:
a 2xx means stored (even across a `kill -9` right after the answers), a
repeated delivery id is stored once, and a failed commit answers 503 with
Retry-After for every delivery in it and stores none of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
import pytest

from gitreg.errors import QueueUnavailable
from gitreg.jobs.queue import JobQueue
from gitreg.jobs.store import Enqueued, Submission
from gitreg.jobs.store_sql import JobStore
from gitreg.settings import load_settings
from gitreg.storage.index import SQLiteIndex
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.server import RunningServer
from tests.support.webhooks import Prepared, delivery

SECRET = "storm-secret-for-tests"
REPOS = 3
UNIQUE = 140
REPEATED = 60  # sent a second time, at the same moment as the first


def register(data_dir: Path, make_repo: Callable[[str], GitRepo]) -> list[str]:
    """REPOS real one-tag modules, registered with SECRET; their forge names."""
    index = SQLiteIndex(load_settings({"data_dir": data_dir}, environ={}).db_path)
    names = []
    for number in range(REPOS):
        repo = make_repo(f"storm{number}")
        simple_module(repo, output=f"storm{number}")
        repo.commit()
        repo.tag("v1.0.0")
        name = f"acme/terraform-null-storm{number}"
        record = index.add_repo(str(repo.path), name, SECRET)
        index.add_module(record.id, "acme", f"storm{number}", "null", "", "")
        names.append(name)
    index.close()
    return names


def storm(names: list[str], unique: int, repeated: int) -> list[Prepared]:
    """`unique` signed tag pushes, the first `repeated` of them twice (a redelivery)."""
    made = [
        delivery(
            "github",
            "push-tag-created",
            repo=names[n % len(names)],
            tag=f"v1.{n}.0",
            delivery_id=f"storm-{n:04d}",
            secret=SECRET,
        )
        for n in range(unique)
    ]
    return made + made[:repeated]


def fire(server: RunningServer, deliveries: list[Prepared]) -> list[httpx.Response]:
    """Every delivery at once, one connection each, as forges send them."""

    async def go() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=len(deliveries))
        async with httpx.AsyncClient(
            base_url=server.url, verify=server.ssl_context(), limits=limits, timeout=60
        ) as client:
            return await asyncio.gather(
                *(client.post(d.route, content=d.body, headers=d.headers) for d in deliveries)
            )

    return asyncio.run(go())


def stored_ids(data_dir: Path) -> Counter[str]:
    db = load_settings({"data_dir": data_dir}, environ={}).db_path
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return Counter(r[0] for r in conn.execute("SELECT delivery_id FROM deliveries"))


def job_count(data_dir: Path) -> int:
    db = load_settings({"data_dir": data_dir}, environ={}).db_path
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT count(*) FROM jobs").fetchone()[0])


@pytest.mark.slow
def test_every_answered_delivery_of_a_storm_is_stored_once_and_survives_kill_9(
    data_dir: Path,
    make_repo: Callable[[str], GitRepo],
    servers: Callable[..., RunningServer],
) -> None:
    deliveries = storm(register(data_dir, make_repo), UNIQUE, REPEATED)
    server = servers(data_dir)
    answers = fire(server, deliveries)
    server.stop(kill=True)  # right after the last answer: no graceful shutdown

    assert [a.status_code for a in answers if a.status_code not in (200, 202)] == []
    by_id: dict[str, list[int]] = {}
    for sent, answer in zip(deliveries, answers, strict=True):
        by_id.setdefault(sent.headers["X-GitHub-Delivery"], []).append(answer.status_code)
    # A repeated id is a new job (or folded into one) once, a duplicate otherwise.
    assert all(sorted(statuses) == [200, 202] for statuses in by_id.values() if len(statuses) > 1)
    assert all(statuses == [202] for statuses in by_id.values() if len(statuses) == 1)

    restarted = servers(data_dir)  # opens (and recovers) the database after the kill
    stored = stored_ids(data_dir)
    assert set(stored) == set(by_id)
    assert set(stored.values()) == {1}
    again = fire(restarted, deliveries[:1])
    assert again[0].status_code == 200
    assert again[0].json()["status"] == "duplicate"


def test_a_failed_commit_answers_503_with_retry_after_to_the_whole_batch_and_stores_none(
    data_dir: Path,
    make_repo: Callable[[str], GitRepo],
    servers: Callable[..., RunningServer],
) -> None:
    deliveries = storm(register(data_dir, make_repo), 30, 10)
    server = servers(data_dir, env={"GITREG_JOB_WORKERS": "0"})
    db = load_settings({"data_dir": data_dir}, environ={}).db_path
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:
        # Every write of a delivery fails from now on.
        conn.execute(
            "CREATE TRIGGER refuse_deliveries BEFORE INSERT ON deliveries"
            " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
        )

    answers = fire(server, deliveries)

    assert {a.status_code for a in answers} == {503}
    for answer in answers:
        assert int(answer.headers["retry-after"]) > 0
        assert answer.headers["content-type"].startswith("application/json")
        assert "could not be stored" in answer.json()["errors"][0]
    # The jobs written before the failing insert were rolled back with it.
    assert stored_ids(data_dir) == Counter()
    assert job_count(data_dir) == 0
    assert "Traceback" not in "".join(a.text for a in answers)

    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:
        # The database is writable again: the forge's retries succeed.
        conn.execute("DROP TRIGGER refuse_deliveries")
    retried = fire(server, deliveries)
    assert {a.status_code for a in retried} == {200, 202}
    assert set(stored_ids(data_dir).values()) == {1}
    assert len(stored_ids(data_dir)) == 30


def test_submissions_waiting_while_the_database_is_busy_share_one_transaction(
    data_dir: Path, make_repo: Callable[[str], GitRepo], monkeypatch: pytest.MonkeyPatch
) -> None:
    register(data_dir, make_repo)
    settings = load_settings({"data_dir": data_dir}, environ={})
    index = SQLiteIndex(settings.db_path)
    store = JobStore(index)
    transactions: list[int] = []
    enqueue_many = store.enqueue_many

    def counted(submissions: Sequence[Submission], now: float, max_attempts: int) -> list[Enqueued]:
        transactions.append(len(submissions))
        return enqueue_many(submissions, now, max_attempts)

    monkeypatch.setattr(store, "enqueue_many", counted)
    queue = JobQueue(store, settings)
    repo_ids = [r.id for r in index.repos()]
    # Another process holds the write lock while 50 deliveries arrive (one twice).
    with contextlib.closing(sqlite3.connect(settings.db_path, isolation_level=None)) as blocker:
        blocker.execute("BEGIN IMMEDIATE")
        futures = [
            queue.submit_grouped([Submission(repo_ids[n % REPOS], "sync", "github", "t", f"d{n}")])
            for n in [*range(50), 7]
        ]
        blocker.execute("COMMIT")
    outcomes = [future.result(timeout=60)[0] for future in futures]
    index.close()

    # The writer may have taken the first one before the lock was free; the rest
    # waited together, and went into one transaction.
    assert sum(transactions) == 51
    assert len(transactions) <= 2
    assert outcomes[-1] == Enqueued(outcomes[7].job_id, "duplicate")
    assert [o.status for o in outcomes[:REPOS]] == ["queued"] * REPOS
    assert {o.status for o in outcomes[REPOS:-1]} == {"merged"}
    assert stored_ids(data_dir) == Counter({f"d{n}": 1 for n in range(50)})


def test_closing_the_queue_stores_what_waits_then_stops_its_writer_thread(
    data_dir: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    register(data_dir, make_repo)
    settings = load_settings({"data_dir": data_dir}, environ={})
    index = SQLiteIndex(settings.db_path)
    writers = writer_threads()  # other tests' queues may still have theirs
    queue = JobQueue(JobStore(index), settings)
    repo_id = index.repos()[0].id
    waiting = queue.submit_grouped([Submission(repo_id, "sync", "github", "t", "before")])
    queue.close()
    assert waiting.result(timeout=60)[0].status == "queued"
    assert writer_threads() == writers
    late = queue.submit_grouped([Submission(repo_id, "sync", "github", "t", "after")])
    with pytest.raises(QueueUnavailable):
        late.result(timeout=60)
    index.close()
    assert stored_ids(data_dir) == Counter({"before": 1})


def writer_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "gitreg-group-commit"}

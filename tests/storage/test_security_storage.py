"""SQLite under concurrent load.

Several processes open one brand-new index at the same moment (so they race
through the migrations), then publish and read concurrently, as the server,
CLI commands and further server workers do on one data dir. None of them may
ever see "database is locked", and nothing written may be lost. A trace of
every SQL statement shows that each write runs inside `BEGIN IMMEDIATE`.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.auth.tokens import new_token, token_hash
from gitreg.services import Services
from gitreg.settings import load_settings
from gitreg.storage.index import SQLiteIndex
from gitreg.storage.sqlite import BUSY_TIMEOUT_MS
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.webhooks import delivery

WRITERS = 4
READERS = 3
ROUNDS = 60

WORKER = """
import sys, time
from pathlib import Path
from gitreg.storage.index import SQLiteIndex
from gitreg.storage.records import NewVersion

db, role, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[5])
number, rounds = int(sys.argv[3]), int(sys.argv[4])
while not go.exists():  # start together, after the imports
    time.sleep(0.001)
index = SQLiteIndex(db)  # a fresh file: every process races through the migrations
reads = 0
for i in range(rounds):
    if role == "writer":
        repo = index.add_repo(f"/srv/git/w{number}-{i}.git", f"load/w{number}-{i}")
        module = index.add_module(repo.id, "load", f"w{number}m{i}", "aws", "", "")
        index.publish_version(NewVersion(
            module_id=module.id, version="1.0.0", version_key="1.0.0", tag="v1.0.0",
            tag_sha="1" * 40, commit_sha="2" * 40, tree_sha="3" * 40,
            archive_sha256=f"{number:032x}{i:032x}", archive_size=i, archive_mtime=i,
        ))
        index.record_fetch(repo.id, "")
    else:
        for module in index.modules()[-20:]:
            reads += len(index.versions(module.id))
        index.repos_by_forge_name(f"load/w0-{i}")
        index.data_version()
index.close()
print(f"{role} {number} ok {reads}")
"""


def test_concurrent_publish_and_read_never_see_database_is_locked(tmp_path: Path) -> None:
    db = tmp_path / "data" / "index.sqlite3"
    go = tmp_path / "go"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db), role, str(n), str(ROUNDS), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role, count in (("writer", WRITERS), ("reader", READERS))
        for n in range(count)
    ]
    time.sleep(0.5)  # let the interpreters import gitreg, so they really start together
    go.touch()
    outputs = [w.communicate(timeout=120) for w in workers]
    for worker, (out, err) in zip(workers, outputs, strict=True):
        assert "database is locked" not in err
        assert worker.returncode == 0, err
        assert " ok " in out
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        published = conn.execute("SELECT count(*) FROM module_versions").fetchone()[0]
        migrations = conn.execute("SELECT count(*), count(DISTINCT name) FROM migrations")
        total, distinct = migrations.fetchone()
    finally:
        conn.close()
    assert published == WRITERS * ROUNDS  # no write was lost
    assert total == distinct  # each migration applied exactly once


def test_index_connections_use_wal_and_a_busy_timeout(tmp_path: Path) -> None:
    index = SQLiteIndex(tmp_path / "index.sqlite3")
    try:
        assert index._rows("PRAGMA journal_mode")[0][0] == "wal"
        assert index._rows("PRAGMA busy_timeout")[0][0] == BUSY_TIMEOUT_MS
        assert index._rows("PRAGMA synchronous")[0][0] == 2  # FULL
    finally:
        index.close()


def test_every_write_runs_inside_begin_immediate(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    """A deferred `BEGIN` that later writes can fail with SQLITE_BUSY at once,
    without waiting for the busy timeout; so no write may happen outside
    `BEGIN IMMEDIATE`. Traced over publishing, webhooks, jobs, tokens and access."""
    flags = {"data_dir": tmp_path / "data", "job_workers": 0, "reconcile_interval": 0}
    app = create_app(load_settings(flags, environ={}))
    svc: Services = app.state.services
    assert isinstance(svc.index, SQLiteIndex)  # no database URL: the embedded index
    statements: list[str] = []
    svc.index._conn.set_trace_callback(statements.append)
    repo = make_repo("hello")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    record = svc.index.add_repo(str(repo.path), "acme/terraform-null-hello", "s3cret")
    svc.index.add_module(record.id, "acme", "hello", "null", "", "")
    token = new_token()
    svc.auth.add_token(token_hash(token), token[:12], "read", ["acme"], "", None)
    svc.auth.set_namespace_private("acme", True)
    svc.cache.invalidate()
    with TestClient(app, base_url="https://testserver") as client:
        prepared = delivery("github", "push-tag-created", secret="s3cret")
        answer = client.post(prepared.route, content=prepared.body, headers=prepared.headers)
        assert answer.status_code == 202
        [job] = svc.job_runner().drain()
        assert job.state == "done"
        auth = {"authorization": f"Bearer {token}"}
        versions = client.get("/v1/modules/acme/hello/null/versions", headers=auth)
        assert versions.status_code == 200
        assert client.get("/readyz").status_code == 200

    in_transaction = False
    writes = 0
    for statement in statements:
        head = statement.lstrip().split(None, 2)
        verb = head[0].upper() if head else ""
        if verb == "BEGIN":
            assert statement.strip().upper() == "BEGIN IMMEDIATE", statement
            in_transaction = True
        elif verb in ("COMMIT", "ROLLBACK", "END"):
            in_transaction = False
        elif verb in ("INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER"):
            assert in_transaction, statement
            writes += 1
    assert writes >= 10  # the trace really covered publishing, jobs and tokens

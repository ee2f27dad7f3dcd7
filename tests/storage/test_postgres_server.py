"""The real PostgreSQL server of the tests (tests/support/postgres.py) is what the
PostgreSQL index relies on: password logins over TCP, one fresh database per test,
a stop and a restart, LISTEN/NOTIFY between connections (cache invalidation across
replicas), `FOR UPDATE SKIP LOCKED` (job claims) and three replicas' pools at once."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from tests.support.postgres import (
    SETTINGS,
    Database,
    PostgresMissing,
    PostgresServer,
    find_bin_dir,
    process_alive,
    sweep_orphans,
)

ROOT = Path(__file__).resolve().parent.parent.parent


def test_gitreg_logs_in_over_tcp_with_its_password_only(
    postgres_server: PostgresServer, postgres_database: Database
) -> None:
    with psycopg.connect(postgres_database.url) as connection:
        who = connection.execute("SELECT current_user, current_database()").fetchall()
        assert who == [("gitreg", postgres_database.name)]
        # The database is ours to build the schema in, as a replica's migrations will.
        connection.execute("CREATE TABLE probe (id integer PRIMARY KEY)")
    port, name = postgres_server.port, postgres_database.name
    for wrong in (
        f"postgresql://gitreg:wrong@127.0.0.1:{port}/{name}",
        f"postgresql://postgres@127.0.0.1:{port}/{name}",
    ):
        with pytest.raises(
            psycopg.OperationalError, match=r"password authentication failed|no password supplied"
        ):
            psycopg.connect(wrong, connect_timeout=5).close()


def test_two_fresh_databases_are_isolated(postgres_server: PostgresServer) -> None:
    first, second = postgres_server.create_database(), postgres_server.create_database()
    assert first.name != second.name
    with psycopg.connect(first.url) as connection:
        connection.execute("CREATE TABLE versions (name text)")
        connection.execute("INSERT INTO versions VALUES ('1.0.0')")
    with psycopg.connect(second.url) as connection:
        tables = connection.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone()
        assert tables == (0,)
    for database in (first, second):
        postgres_server.drop_database(database.name)


def test_stop_refuses_connections_and_start_brings_the_data_back(
    postgres_server: PostgresServer, postgres_database: Database
) -> None:
    with psycopg.connect(postgres_database.url, autocommit=True) as connection:
        connection.execute("CREATE TABLE kept (value text)")
        connection.execute("INSERT INTO kept VALUES ('before the restart')")
        with postgres_server.down():
            with pytest.raises(psycopg.OperationalError):
                connection.execute("SELECT 1")
            with pytest.raises(psycopg.OperationalError):
                psycopg.connect(postgres_database.url, connect_timeout=5).close()
    with psycopg.connect(postgres_database.url) as connection:
        assert connection.execute("SELECT value FROM kept").fetchall() == [("before the restart",)]


def test_a_crash_and_restart_keeps_committed_rows(
    postgres_server: PostgresServer, postgres_database: Database
) -> None:
    with psycopg.connect(postgres_database.url, autocommit=True) as connection:
        connection.execute("CREATE TABLE kept (value text)")
        connection.execute("INSERT INTO kept VALUES ('committed')")
    postgres_server.restart("immediate")
    with psycopg.connect(postgres_database.url) as connection:
        assert connection.execute("SELECT value FROM kept").fetchall() == [("committed",)]


def test_notify_reaches_a_listener_on_another_connection(postgres_database: Database) -> None:
    with (
        psycopg.connect(postgres_database.url, autocommit=True) as listener,
        psycopg.connect(postgres_database.url, autocommit=True) as publisher,
    ):
        listener.execute("LISTEN metadata_changed")
        publisher.execute("SELECT pg_notify('metadata_changed', 'acme/vpc/aws')")
        received = list(listener.notifies(timeout=30, stop_after=1))
    assert [(note.channel, note.payload) for note in received] == [
        ("metadata_changed", "acme/vpc/aws")
    ]


def test_skip_locked_hands_each_row_to_one_claimer(postgres_database: Database) -> None:
    claim = "SELECT id FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
    with psycopg.connect(postgres_database.url, autocommit=True) as setup:
        setup.execute("CREATE TABLE jobs (id integer PRIMARY KEY)")
        setup.execute("INSERT INTO jobs VALUES (1), (2)")
    with (
        psycopg.connect(postgres_database.url) as first,
        psycopg.connect(postgres_database.url) as second,
        psycopg.connect(postgres_database.url) as third,
    ):
        assert first.execute(claim).fetchall() == [(1,)]
        assert second.execute(claim).fetchall() == [(2,)]
        assert third.execute(claim).fetchall() == []
        first.rollback()
        assert third.execute(claim).fetchall() == [(1,)]


def test_three_replicas_pools_fit_in_max_connections(postgres_database: Database) -> None:
    # 3 x 40 is more than PostgreSQL's default max_connections of 100.
    per_replica = 40
    assert 3 * per_replica < int(SETTINGS["max_connections"])
    pools = [
        ConnectionPool(
            postgres_database.url, min_size=per_replica, max_size=per_replica, open=False
        )
        for _replica in range(3)
    ]
    try:
        for pool in pools:
            pool.open(wait=True, timeout=60)
        with pools[0].connection() as connection:
            count = connection.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            ).fetchone()
        assert count is not None
        assert count[0] >= 3 * per_replica
    finally:
        for pool in pools:
            pool.close()


def _fake_install(root: Path, version: str) -> Path:
    bin_dir = root / version / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("initdb", "postgres"):
        (bin_dir / name).write_text("")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_the_highest_installed_version_is_used_when_path_has_none(tmp_path: Path) -> None:
    for version in ("9.6", "10", "16", "15"):
        _fake_install(tmp_path, version)
    (tmp_path / "17" / "bin").mkdir(parents=True)  # a client-only install: no server
    assert find_bin_dir(path="", lib_root=tmp_path) == tmp_path / "16" / "bin"


def test_initdb_on_path_wins_over_the_versioned_directories(tmp_path: Path) -> None:
    on_path = _fake_install(tmp_path / "local", "12")
    _fake_install(tmp_path / "lib", "16")
    assert find_bin_dir(path=str(on_path), lib_root=tmp_path / "lib") == on_path


def test_missing_binaries_name_the_package_to_install(tmp_path: Path) -> None:
    with pytest.raises(PostgresMissing, match=r"apt-get install -y postgresql"):
        find_bin_dir(path="", lib_root=tmp_path)


# A session that dies without teardown: start a server, print its pid, SIGKILL itself.
KILLED_SESSION = """
import os, sys
from pathlib import Path
from tests.support.postgres import start_postgres
server = start_postgres(Path(sys.argv[1]))
assert server.process is not None
print(server.process.pid, flush=True)
os.kill(os.getpid(), 9)
"""


def test_the_server_of_a_killed_session_is_stopped_by_the_next_one() -> None:
    # Not tmp_path: its 0700 parent would keep the postgres user out.
    root = Path(tempfile.mkdtemp(prefix="gitreg-test-sweep-"))
    root.chmod(0o711)
    postmaster = 0
    try:
        killed = subprocess.run(
            [sys.executable, "-c", KILLED_SESSION, str(root)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        postmaster = int(killed.stdout)
        assert process_alive(postmaster)
        live = root / "gitreg-test-postgres-live"
        live.mkdir()
        (live / "session.pid").write_text(str(os.getpid()))
        sweep_orphans(root)
        assert not process_alive(postmaster)
        assert [path.name for path in root.iterdir()] == [live.name]
    finally:
        if postmaster and process_alive(postmaster):
            os.kill(postmaster, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)

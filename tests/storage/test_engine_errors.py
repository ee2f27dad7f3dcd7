"""The index engines' errors become gitreg's inside gitreg/storage/, so no
other layer knows sqlite3 or psycopg (tests/test_architecture.py): a full disk
is `StorageFull`, an index that cannot be reached or locked in time is
`DatabaseUnavailable`, both 503 with Retry-After. A full disk met for real is
tests/storage/test_disk_full.py; a PostgreSQL outage is test_postgres_index.py.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from gitreg.errors import DatabaseUnavailable, StorageFull
from gitreg.storage.postgres import unavailable_is_503
from gitreg.storage.sqlite import SQLiteDatabase


def test_an_sqlite_index_locked_past_the_busy_timeout_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gitreg.storage.sqlite.BUSY_TIMEOUT_MS", 100)
    path = tmp_path / "index.sqlite3"
    db = SQLiteDatabase(path)
    other = sqlite3.connect(path, isolation_level=None)  # another process's writer
    try:
        other.execute("BEGIN EXCLUSIVE")
        locked = pytest.raises(DatabaseUnavailable, match="database is locked")
        with locked as caught, db.write() as conn:
            conn.execute("SELECT 1")
        assert caught.value.status == 503 and caught.value.retry_after > 0
        other.execute("ROLLBACK")
        with db.write() as conn:  # and it ends by itself
            conn.execute("SELECT 1")
    finally:
        other.close()
        db.close()


def test_a_malformed_statement_stays_a_bug(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "index.sqlite3")
    try:
        with pytest.raises(sqlite3.OperationalError, match="syntax error"):
            db.rows("SELEKT 1")
    finally:
        db.close()


def test_a_postgresql_server_out_of_disk_space_is_storage_full() -> None:
    url = "postgresql://gitreg:hunter2@db.example:5432/registry"
    with pytest.raises(StorageFull) as caught, unavailable_is_503(url):
        raise psycopg.errors.DiskFull("could not extend file: No space left on device")
    assert caught.value.status == 503 and caught.value.retry_after > 0
    assert "hunter2" not in str(caught.value)
    assert str(caught.value).startswith("storage is full: the database postgresql://gitreg:***@")


def test_a_database_outage_answers_clients_without_naming_the_database() -> None:
    failure = DatabaseUnavailable("postgresql://gitreg:***@db.internal:5432/reg: refused")
    assert "db.internal" in str(failure)  # the operator's log line keeps it
    assert "db.internal" not in failure.public_message()
    assert "gitreg" not in failure.public_message()
    told = DatabaseUnavailable("postgresql://db.internal/reg: gone", reason="connection lost")
    assert told.public_message() == "the database is unavailable (connection lost); retry shortly"

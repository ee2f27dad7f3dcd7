"""`SQLiteIndex`'s connections: reads never queue behind the writer,
see every commit made before them, and `close()` closes every connection."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitreg.auth.store_sql import AuthStore
from gitreg.storage import sqlite as sqlite_module
from gitreg.storage.index import SQLiteIndex
from gitreg.storage.sqlite import SQLiteDatabase
from gitreg.usage.store import DownloadRow
from gitreg.usage.store_sql import DownloadCountStore


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SQLiteIndex]:
    opened = SQLiteIndex(tmp_path / "index.sqlite3")
    yield opened
    opened.close()


def test_a_read_does_not_wait_for_an_open_write_transaction(index: SQLiteIndex) -> None:
    index.add_repo("https://example.test/a", "acme/a")
    writing, release = threading.Event(), threading.Event()

    def slow_write() -> None:
        with index._write() as conn:
            conn.execute(
                "INSERT INTO repos (url, forge_repo, webhook_secret, created_at)"
                " VALUES ('https://example.test/b', 'acme/b', '', 'now')"
            )
            writing.set()
            release.wait(10)

    writer = threading.Thread(target=slow_write)
    writer.start()
    try:
        assert writing.wait(5)
        seen: list[int] = []
        reader = threading.Thread(target=lambda: seen.append(len(index.repos())))
        reader.start()
        reader.join(2)
        assert seen == [1], "the read waited for the writer (or saw its uncommitted row)"
    finally:
        release.set()
        writer.join()
    assert len(index.repos()) == 2  # committed, so the next read transaction sees it


def test_a_read_on_another_thread_sees_a_commit_at_once(index: SQLiteIndex) -> None:
    found: list[int] = []
    for n in range(20):
        index.add_repo(f"https://example.test/{n}", f"acme/{n}")
        reader = threading.Thread(target=lambda: found.append(len(index.repos())))
        reader.start()
        reader.join()
    assert found == list(range(1, 21))


def test_data_version_moves_only_for_other_connections_commits(
    index: SQLiteIndex, tmp_path: Path
) -> None:
    """The metadata cache's watcher must not take this process's own job-queue
    commits for another process's, but must see the other process's."""
    before = index.data_version()
    index.add_repo("https://example.test/own", "acme/own")
    assert index.data_version() == before
    other = SQLiteIndex(tmp_path / "index.sqlite3")
    try:
        other.add_repo("https://example.test/other", "acme/other")
    finally:
        other.close()
    assert index.data_version() != before


def test_data_version_ignores_other_processes_commits_that_change_no_metadata(
    index: SQLiteIndex, tmp_path: Path
) -> None:
    """Download-count flushes, job-queue traffic and sign-in steps of another
    worker (`write(notify=False)`) must not empty this worker's metadata cache."""
    before = index.data_version()
    other = SQLiteIndex(tmp_path / "index.sqlite3")
    try:
        DownloadCountStore(other).add_downloads(
            [DownloadRow("module", 1, "1.0.0", "2026-01-01", 0, 1)]
        )
        AuthStore(other).put_login_state("k", "{}", time.time() + 60, time.time())
        assert index.data_version() == before
        other.add_repo("https://example.test/other", "acme/other")  # metadata
    finally:
        other.close()
    assert index.data_version() != before


def test_reads_are_on_a_bounded_read_only_pool(index: SQLiteIndex) -> None:
    threads = [
        threading.Thread(target=lambda: [index.repos() for _ in range(50)]) for _ in range(20)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 1 <= len(_db(index)._all_readers) <= sqlite_module.MAX_READERS
    with pytest.raises(sqlite3.OperationalError, match="readonly"), _db(index).reader() as conn:
        conn.execute("DELETE FROM repos")


def test_close_closes_readers_made_by_threads_that_are_gone(tmp_path: Path) -> None:
    index = SQLiteIndex(tmp_path / "index.sqlite3")
    reader = threading.Thread(target=index.repos)
    reader.start()
    reader.join()
    made = list(_db(index)._all_readers)
    assert made
    index.close()
    for conn in made:
        with pytest.raises(sqlite3.ProgrammingError):
            conn.execute("SELECT 1")
    with pytest.raises(sqlite3.ProgrammingError):
        index.repos()


def _db(index: SQLiteIndex) -> SQLiteDatabase:
    assert isinstance(index.db, SQLiteDatabase)
    return index.db

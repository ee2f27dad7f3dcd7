"""The embedded engine: one SQLite file in the data directory (the default).

SQLite runs in WAL mode with a busy timeout, and every write opens with
`BEGIN IMMEDIATE` so concurrent writers queue instead of failing with
"database is locked" half-way through a transaction. Several
processes (the server, CLI commands, more server workers) share one file.

What SQLite reports about its surroundings becomes gitreg's own error in
`_engine_errors`, around every entry point, so nothing above this module
knows sqlite3: a full disk is `StorageFull`, a file that cannot be opened,
read, written or locked in time is `DatabaseUnavailable`. Anything else
(a malformed statement, a constraint, a write through a read-only reader)
is a bug and stays as it is.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gitreg.errors import ConfigError, DatabaseUnavailable, StorageFull, storage_full
from gitreg.storage.attached import carrying
from gitreg.storage.database import Connection, Dialect, Params, Row
from gitreg.storage.migrations import check_known, pending

BUSY_TIMEOUT_MS = 30_000
# Read connections open at most at once. Each keeps its own page and statement
# cache, so the pool is bounded to stay within a worker's memory budget
# (docs/performance.md); reads take well under a millisecond, so on a couple
# of cores more would only add memory, and a reader waits for a free one.
MAX_READERS = 8
READER_CACHE_KIB = 128


def _enable_wal(conn: sqlite3.Connection) -> None:
    """Switch a database to WAL once. Changing the journal mode needs an exclusive
    lock and SQLite answers "database is locked" at once, without the busy
    handler, when several processes open a brand-new file together, so it
    is retried here for as long as the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


# Result codes (their low byte: extended codes carry more) that describe the
# file or its locks rather than the statement: retrying later can succeed.
_UNAVAILABLE = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PROTOCOL,
    }
)


def _is_full(exc: sqlite3.Error) -> bool:
    return "database or disk is full" in str(exc) or (
        getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
    )


@contextlib.contextmanager
def _engine_errors(where: Path) -> Iterator[None]:
    """The one translation of SQLite's errors into gitreg's (module docstring)."""
    try:
        yield
    except sqlite3.Error as exc:
        if _is_full(exc):
            raise StorageFull(f"{where} ({exc})") from exc
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in _UNAVAILABLE:
            raise DatabaseUnavailable(f"{where}: {exc}") from exc
        raise
    except OSError as exc:
        if (full := storage_full(exc, str(where))) is not None:
            raise full from exc
        raise


def _integrity_check(path: Path) -> str:
    """SQLite's own verdict on a database file: "ok" or the first problems found."""
    check = sqlite3.connect(path)
    try:
        return str(check.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        check.close()


class SQLiteDatabase:
    """One writer connection behind a lock, and read connections that never take it.

    Reads stop queueing behind writes, as datasette does: in WAL mode a read
    transaction sees the last commit and is not blocked by a writer holding
    its transaction open through an fsync. Read connections are pooled
    rather than kept per thread, so threads that come and go (job workers,
    the request thread pool) cannot leave connections behind, and bounded by
    `MAX_READERS`; every one made is remembered so that `close()` closes them.
    """

    dialect: Dialect = "sqlite"

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.RLock()
        self._closed = False
        self._idle_readers: list[sqlite3.Connection] = []
        self._all_readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()  # guards the two lists, never held during SQL
        self._readers_free = threading.BoundedSemaphore(MAX_READERS)
        self._own_changes = 0  # this process's commits counted in gitreg_changes
        with _engine_errors(path):
            self.conn = self._connect()
            with self._lock:
                _enable_wal(self.conn)
                self.conn.execute("PRAGMA foreign_keys = ON")
        self._migrate()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            isolation_level=None,
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000,
        )
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA synchronous = FULL")
        return conn

    def close(self) -> None:
        with self._lock, self._readers_lock:
            self._closed = True
            for reader in self._all_readers:
                reader.close()
            self._all_readers.clear()
            self._idle_readers.clear()
            self.conn.close()

    @contextlib.contextmanager
    def write(self, notify: bool = True, exclusive: bool = True) -> Iterator[Connection]:
        """One write transaction. Every store's writes go through here, so a full
        disk becomes `StorageFull` (503, retry later) in one place. `notify`:
        other processes see the commit through `data_version`, as on
        PostgreSQL; `exclusive` is PostgreSQL's (SQLite has one writer)."""
        with self._lock, _engine_errors(self.path):
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                with carrying(self.conn):
                    yield self.conn
                if notify:  # other processes' caches see it (`data_version`)
                    self.conn.execute("UPDATE gitreg_changes SET seq = seq + 1")
            except BaseException:
                # SQLite may already have rolled back (SQLITE_FULL does): a second
                # ROLLBACK would hide the real error behind "no transaction".
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
            self._own_changes += notify

    @contextlib.contextmanager
    def reader(self) -> Iterator[sqlite3.Connection]:
        """A read connection for this thread's use alone until it is handed back.
        `query_only` makes a write through it an error, not a deferred-`BEGIN`
        write that could fail with SQLITE_BUSY at once."""
        with _engine_errors(self.path), self._readers_free:
            conn = self._idle_reader()
            try:
                yield conn
            finally:
                if conn.in_transaction:  # only if a statement was left unfinished
                    conn.execute("ROLLBACK")
                with self._readers_lock:
                    if not self._closed:
                        self._idle_readers.append(conn)

    def _idle_reader(self) -> sqlite3.Connection:
        with self._readers_lock:
            if self._closed:
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            if self._idle_readers:
                return self._idle_readers.pop()
        conn = self._connect()
        conn.execute("PRAGMA query_only = ON")
        # A small page cache per reader: SQLite's default (2 MiB each, up to
        # MAX_READERS + 1 connections) fills a large share of a worker's memory
        # on a large index (docs/performance.md, "Memory of one worker"); the
        # pages stay in the OS's cache, and a lookup rereads a B-tree's few
        # levels from there.
        conn.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
        with self._readers_lock:
            self._all_readers.append(conn)
        return conn

    def rows(self, sql: str, params: Params = ()) -> list[Row]:
        """Every row of one read-only statement, as its own read transaction: it
        sees every commit made before it started, this process's writer's too."""
        with self.reader() as conn:
            return list(conn.execute(sql, params))

    def tuples(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        with self.reader() as conn:
            cursor = conn.cursor()
            cursor.row_factory = None  # the connection's is sqlite3.Row
            return cursor.execute(sql, params).fetchall()

    def _migrate(self) -> None:
        with self.write(notify=False) as conn:  # opening the index changes no metadata
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
            )
            # The count of metadata commits (`write(notify=True)`), as on
            # PostgreSQL: outside the migrations, which every process shares.
            conn.execute("CREATE TABLE IF NOT EXISTS gitreg_changes (seq INTEGER NOT NULL)")
            if conn.execute("SELECT count(*) FROM gitreg_changes").fetchone()[0] == 0:
                conn.execute("INSERT INTO gitreg_changes (seq) VALUES (0)")
            applied = {row[0] for row in conn.execute("SELECT name FROM migrations")}
        check_known(applied, str(self.path))
        for name, statements in pending(applied, self.dialect):
            with self.write() as conn:
                # Re-checked inside the write lock: another process may have won.
                if conn.execute("SELECT 1 FROM migrations WHERE name = ?", (name,)).fetchone():
                    continue
                for statement in statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (name, _now())
                )

    def data_version(self) -> int:
        """Changes whenever another process commits a change to metadata
        (`write(notify=True)`). Not `PRAGMA data_version`, which moves for
        every commit by another connection: with several workers on one
        file, each one's download-count flushes, job-queue traffic and
        sign-in steps emptied every other worker's metadata cache every few
        seconds. This process's own changes are left out (its writers
        invalidate its cache directly), as the pragma left them out."""
        with self._lock, _engine_errors(self.path):
            seq = int(self.conn.execute("SELECT seq FROM gitreg_changes").fetchone()[0])
            return seq - self._own_changes

    def check_writable(self) -> None:
        with self.write(notify=False) as conn:
            conn.execute("SELECT 1")

    def table_names(self) -> list[str]:
        with self.reader() as conn:
            # Imported here, not at start-up: sqlite-utils brings click, dateutil
            # and pygments, memory a server worker does not need.
            import sqlite_utils

            return list(sqlite_utils.Database(conn).table_names())

    def backup(self, target: Path) -> None:
        """A consistent copy of the index at `target`, checked before it is kept:
        written under a `.partial` name and renamed only once SQLite's
        integrity_check passes, so `target` is whole or absent."""
        partial = target.with_name(target.name + ".partial")
        partial.unlink(missing_ok=True)
        with _engine_errors(target):
            self._online_copy(partial)
            verdict = _integrity_check(partial)
        if verdict != "ok":
            raise ConfigError(f"backup failed its integrity check: {verdict}")
        os.replace(partial, target)

    def _online_copy(self, target: Path) -> None:
        """SQLite's online backup API: consistent while the server keeps writing."""
        dest = sqlite3.connect(target)
        try:
            with self._lock:
                self.conn.backup(dest)
        finally:
            dest.close()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

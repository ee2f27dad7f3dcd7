"""PostgreSQL for scale-out (docs/scale-out.md): many replicas, one index.

Imported only when `database_url` names PostgreSQL, so a server on the
embedded default never loads psycopg (the per-worker memory budget,
docs/performance.md).

The stores' SQL is shared with SQLite (gitreg/storage/database.py); this
module only adapts it: `?`/`:name` placeholders become psycopg's, and every
`write()` takes one transaction-scoped advisory lock, which gives PostgreSQL
the single-writer semantics that `BEGIN IMMEDIATE` gives SQLite, so a store's
read-then-write logic is as safe across replicas as across processes. The
job claim opts out and locks rows instead (`FOR UPDATE SKIP LOCKED`).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import psycopg_pool
from psycopg.adapt import Dumper
from psycopg.rows import tuple_row

from gitreg.errors import ConfigError, DatabaseUnavailable, StorageFull
from gitreg.storage.attached import carrying
from gitreg.storage.database import Connection, Cursor, Dialect, Params, Row
from gitreg.storage.migrations import check_known, pending

log = logging.getLogger("gitreg.storage.postgres")

# Advisory lock keys (64-bit, gitreg's own range). The write lock serialises
# write transactions; the migration lock lets one starting replica migrate
# while the others wait for it, so migrations run once.
WRITE_LOCK = 0x67697472656701
MIGRATION_LOCK = 0x67697472656702
CHANNEL = "gitreg_changes"
# Seconds a request waits for a pooled connection, or a new one to connect,
# before it is answered 503 with Retry-After; DOWN_TIMEOUT while the change
# feed finds the database down, so an outage is answered without the wait.
CONNECT_TIMEOUT = 5.0
DOWN_TIMEOUT = 1.0
# Seconds the pool keeps retrying a connection it lost before it gives up on
# it and connects afresh for the next request: its retries back off
# exponentially, and after a long outage a late retry kept the database
# unused for many seconds after it was back.
RECONNECT_WITHIN = 2.0
# How often the change feed also reads the change counter, for notifications
# that never arrive (a pooler in transaction mode drops LISTEN); the same
# poll keeps the replica's view of the database's health fresh (`problem`).
POLL_INTERVAL = 0.5
# The feed's connect timeout: libpq's smallest (it rounds less up to 2 s).
FEED_CONNECT_TIMEOUT = 2
# Seconds without an answer after which the database counts as down: a poll
# is due every POLL_INTERVAL, so only a server that stopped answering (a
# network partition) stays silent that long.
SILENT_AFTER = 2.0


# psycopg_pool logs a warning for every connection attempt that fails, and
# while the database is down each request makes one: a line a minute says
# the pool cannot connect; the change feed logs the outage and its end.
POOL_WARNING_EVERY = 60.0


class _PoolConnectWarnings(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self._last = -POOL_WARNING_EVERY

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("error connecting in"):
            return True
        now = time.monotonic()
        if now - self._last < POOL_WARNING_EVERY:
            return False
        self._last = now
        return True


logging.getLogger("psycopg.pool").addFilter(_PoolConnectWarnings())


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


_PLACEHOLDER = re.compile(r"'[^']*'|\?|(?<!:):([A-Za-z_]\w*)|%")


def translate(sql: str) -> str:
    """SQLite's placeholders in psycopg's words; string literals untouched
    but for `%`, which psycopg reads everywhere."""

    def one(match: re.Match[str]) -> str:
        text = match.group(0)
        if text.startswith("'"):
            return text.replace("%", "%%")
        if text == "?":
            return "%s"
        if text == "%":
            return "%%"
        return f"%({match.group(1)})s"

    return _PLACEHOLDER.sub(one, sql)


class PgRow(tuple[Any, ...]):
    """A row by position or by column name, as `sqlite3.Row` is."""

    _names: dict[str, int]

    def __new__(cls, values: Any, names: dict[str, int]) -> PgRow:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return super().__getitem__(self._names[key])
        return super().__getitem__(key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: Any) -> Any:
    names = {column.name: i for i, column in enumerate(cursor.description or ())}
    return lambda values: PgRow(values, names)


class _BoolAsInteger(Dumper):
    """Flags are INTEGER 0/1 columns (the shared schema); PostgreSQL will not
    compare or store a boolean parameter there, so booleans go as integers."""

    oid = psycopg.postgres.types["int8"].oid

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


def _configure(conn: psycopg.Connection[Any]) -> None:
    conn.adapters.register_dumper(bool, _BoolAsInteger)
    conn.row_factory = _row_factory


class _Connection:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Params = (), /) -> Cursor:
        return self._conn.execute(translate(sql), parameters)


@contextlib.contextmanager
def unavailable_is_503(url: str) -> Iterator[None]:
    """The one translation of psycopg's errors into gitreg's: a server out of
    disk space is `StorageFull`; a lost, unreachable or overloaded one is
    `DatabaseUnavailable`; both 503 with Retry-After, never a 500."""
    try:
        yield
    except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, psycopg.errors.DiskFull):
            raise StorageFull(f"the database {redact(url)} ({detail})") from exc
        raise DatabaseUnavailable(f"{redact(url)}: {detail}") from exc


class PostgresDatabase:
    dialect: Dialect = "postgresql"

    def __init__(self, url: str, max_connections: int = 10, listen: bool = True) -> None:
        self.url = url
        self._migrate()
        self._pool = psycopg_pool.ConnectionPool(
            url,
            min_size=1 if listen else 0,
            max_size=max_connections,
            kwargs={"autocommit": True, "connect_timeout": int(CONNECT_TIMEOUT)},
            configure=_configure,
            check=psycopg_pool.ConnectionPool.check_connection,
            timeout=CONNECT_TIMEOUT,
            reconnect_timeout=RECONNECT_WITHIN,
            open=True,
            name="gitreg",
        )
        self._changes = ChangeFeed(url) if listen else None

    def close(self) -> None:
        if self._changes is not None:
            self._changes.stop()
        self._pool.close()

    def _connection(self) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]:
        down = self._changes is not None and self._changes.problem() is not None
        return self._pool.connection(timeout=DOWN_TIMEOUT if down else CONNECT_TIMEOUT)

    def check_writable(self) -> None:
        """For /readyz, without waiting on a database that is down: the change
        feed's view, refreshed every POLL_INTERVAL on a connection of its own
        and with its own short connect timeout; a replica without a feed
        opens a write transaction."""
        if self._changes is None:
            with self.write(notify=False) as conn:
                conn.execute("SELECT 1")
        elif (problem := self._changes.problem()) is not None:
            raise DatabaseUnavailable(f"{redact(self.url)}: {problem}", reason=problem)

    @contextlib.contextmanager
    def write(self, notify: bool = True, exclusive: bool = True) -> Iterator[Connection]:
        with unavailable_is_503(self.url), self._connection() as conn, conn.transaction():
            if exclusive:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            wrapped = _Connection(conn)
            with carrying(wrapped):
                yield wrapped
            if notify:
                # Delivered at COMMIT, to every replica's change feed.
                conn.execute("UPDATE gitreg_changes SET seq = seq + 1")
                conn.execute(f"NOTIFY {CHANNEL}")

    def rows(self, sql: str, params: Params = ()) -> list[Row]:
        with unavailable_is_503(self.url), self._connection() as conn:
            return conn.execute(translate(sql), params).fetchall()

    def tuples(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        with unavailable_is_503(self.url), self._connection() as conn:
            cursor = conn.cursor(row_factory=tuple_row)
            return cursor.execute(translate(sql), params).fetchall()

    def data_version(self) -> int:
        """No round trip: the change feed's count of changes it has seen."""
        return self._changes.version if self._changes is not None else 0

    def table_names(self) -> list[str]:
        rows = self.rows(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() ORDER BY table_name"
        )
        return [str(r[0]) for r in rows]

    def backup(self, target: Path) -> None:
        raise ConfigError(
            "the index is in PostgreSQL: back it up with pg_dump or the database's own"
            " backups (docs/scale-out.md); `gitreg backup` copies an SQLite index"
        )

    def _migrate(self) -> None:
        """Every starting replica comes here; the advisory lock lets the first
        migrate while the others wait, then find nothing left to do."""
        with (
            unavailable_is_503(self.url),
            psycopg.connect(
                self.url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT)
            ) as conn,
        ):
            conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
            try:
                _apply_migrations(conn, self.url)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


def _apply_migrations(conn: psycopg.Connection[Any], url: str) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    # The change counter behind the feed's poll fallback: PostgreSQL only.
    conn.execute("CREATE TABLE IF NOT EXISTS gitreg_changes (seq BIGINT NOT NULL)")
    if conn.execute("SELECT count(*) FROM gitreg_changes").fetchone() == (0,):
        conn.execute("INSERT INTO gitreg_changes (seq) VALUES (0)")
    applied = {str(row[0]) for row in conn.execute("SELECT name FROM migrations")}
    check_known(applied, redact(url))
    for name, statements in pending(applied, "postgresql"):
        with conn.transaction():
            for statement in statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO migrations (name, applied_at) VALUES (%s, %s)",
                (name, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
            )
        log.info("applied migration %s", name)


class ChangeFeed:
    """Counts commits that metadata caches must see, made by any replica, and
    is this replica's view of the database's health.

    A thread LISTENs on its own connection: a NOTIFY wakes it at once (a
    publish is visible everywhere well within a second). Every
    `POLL_INTERVAL` it also reads the change counter, which catches a
    notification lost to a pooler or a reconnect, and proves the database
    answers. While the database is unreachable it retries every
    `POLL_INTERVAL`; on reconnecting it counts one change, since it cannot
    know what it missed.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.version = 0
        # Made right after the migrations' connection: the database answered.
        self._answered_at = time.monotonic()
        self._failure: str | None = None
        self._connected = False  # in the current attempt
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gitreg-changes", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Asks the thread to end without waiting for it: it notices within
        `POLL_INTERVAL` and closes its own connection, and a CLI command should
        not wait that long to exit (the thread is a daemon)."""
        self._stopping.set()

    def problem(self) -> str | None:
        """Why the database cannot be used now, in words naming no host or
        user, or None when it answered the last poll. Costs no round trip."""
        if (failure := self._failure) is not None:
            return failure
        silent = time.monotonic() - self._answered_at
        return f"no answer for {silent:.0f} s" if silent > SILENT_AFTER else None

    def _run(self) -> None:
        seen: int | None = None
        while not self._stopping.is_set():
            self._connected = False
            try:
                seen = self._listen(seen)
            except psycopg.Error as exc:
                failure = "connection lost" if self._connected else "cannot connect"
                if self._failure is None:  # one line per outage, not one per retry
                    log.warning("change feed: %s; retrying", str(exc).strip() or type(exc).__name__)
                self._failure = failure
                self._stopping.wait(POLL_INTERVAL)

    def _listen(self, seen: int | None) -> int | None:
        with psycopg.connect(
            self.url, autocommit=True, connect_timeout=FEED_CONNECT_TIMEOUT
        ) as conn:
            self._connected = True
            conn.execute(f"LISTEN {CHANNEL}")
            self.version += 1
            while not self._stopping.is_set():
                row = conn.execute("SELECT seq, pg_is_in_recovery() FROM gitreg_changes").fetchone()
                current = int(row[0]) if row else 0
                self._answered(read_only=bool(row and row[1]))
                if current != seen:
                    seen = current
                    self.version += 1
                for _ in conn.notifies(timeout=POLL_INTERVAL, stop_after=1):
                    pass
        return seen

    def _answered(self, read_only: bool) -> None:
        if self._failure is not None and not read_only:
            log.info("change feed: the database answers again")
        self._answered_at = time.monotonic()
        self._failure = "read-only: a standby in recovery" if read_only else None

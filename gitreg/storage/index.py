"""The SQLite index: every SQL statement in gitreg lives in this package.

SQLite runs in WAL mode with a busy timeout, and every write opens with
`BEGIN IMMEDIATE` so concurrent writers queue instead of failing with
"database is locked" half-way through a transaction (checklist S1). Several
processes (the server, CLI commands, more server workers) share one file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from gitreg.errors import ConfigError, Conflict, NotFound, storage_full
from gitreg.storage.records import (
    ConflictRecord,
    ModuleRecord,
    NewVersion,
    RepoRecord,
    VersionRecord,
)
from gitreg.storage.schema import MIGRATIONS

BUSY_TIMEOUT_MS = 30_000
# Read connections open at most at once. Each keeps its own page and statement
# cache, so the pool is bounded to stay within a worker's memory budget
# (docs/performance.md); reads take well under a millisecond, so on a couple
# of cores more would only add memory, and a reader waits for a free one.
MAX_READERS = 8


def _enable_wal(conn: sqlite3.Connection) -> None:
    """Switch a database to WAL once. Changing the journal mode needs an exclusive
    lock and SQLite answers "database is locked" at once, without the busy
    handler, when several processes open a brand-new file together (S1), so it
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


@contextlib.contextmanager
def _full_disk_is_storage_full(where: Path) -> Iterator[None]:
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
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


def utcnow() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def address_key(namespace: str, name: str, system: str) -> str:
    """Terraform keeps the user's case in paths; we match case-insensitively."""
    return f"{namespace}/{name}/{system}".lower()


def link_module(
    conn: sqlite3.Connection,
    repo_id: int,
    namespace: str,
    name: str,
    system: str,
    subdir: str,
    tag_prefix: str,
) -> None:
    """Inside a write transaction: give the repository this module address.
    Idempotent for the same repository, subdirectory and tag prefix; the
    address is unique, so anything else is a Conflict."""
    key = address_key(namespace, name, system)
    existing = conn.execute(
        "SELECT repo_id, subdir, tag_prefix FROM modules WHERE address_key = ?", (key,)
    ).fetchone()
    if existing is None:
        conn.execute(
            "INSERT INTO modules (repo_id, namespace, name, system, address_key,"
            " subdir, tag_prefix, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (repo_id, namespace, name, system, key, subdir, tag_prefix, utcnow()),
        )
    elif tuple(existing) != (repo_id, subdir, tag_prefix):
        raise Conflict(
            f"module {namespace}/{name}/{system} is already registered"
            " with another repository, subdirectory or tag prefix"
        )


class SQLiteIndex:
    """One writer connection behind a lock, and read connections that never take it.

    Reads stop queueing behind writes, as datasette does: in WAL mode a read
    transaction sees the last commit and is not blocked by a writer holding
    its transaction open through an fsync (S1). Read connections are pooled
    rather than kept per thread, so threads that come and go (job workers,
    the request thread pool) cannot leave connections behind, and bounded by
    `MAX_READERS`; every one made is remembered so that `close()` closes them.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._lock = threading.RLock()
        self._closed = False
        self._idle_readers: list[sqlite3.Connection] = []
        self._all_readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()  # guards the two lists, never held during SQL
        self._readers_free = threading.BoundedSemaphore(MAX_READERS)
        self._conn = self._connect()
        with self._lock:
            _enable_wal(self._conn)
            self._conn.execute("PRAGMA foreign_keys = ON")
        self._migrate()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path,
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
            self._conn.close()

    # -- plumbing -----------------------------------------------------------

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction. Every store's writes go through here, so a full
        disk becomes `StorageFull` (503, retry later) in one place."""
        with self._lock, _full_disk_is_storage_full(self._path):
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                # SQLite may already have rolled back (SQLITE_FULL does): a second
                # ROLLBACK would hide the real error behind "no transaction".
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextlib.contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """A read connection for this thread's use alone until it is handed back.
        `query_only` makes a write through it an error, not a deferred-`BEGIN`
        write that could fail with SQLITE_BUSY at once (S1)."""
        with self._readers_free:
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
        with self._readers_lock:
            self._all_readers.append(conn)
        return conn

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Every row of one read-only statement, as its own read transaction: it
        sees every commit made before it started, this process's writer's too."""
        with self._reader() as conn:
            return list(conn.execute(sql, params))

    def _migrate(self) -> None:
        with self._write() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
            )
            applied = {row[0] for row in conn.execute("SELECT name FROM migrations")}
        for name, ddl in MIGRATIONS:
            if name in applied:
                continue
            with self._write() as conn:
                # Re-checked inside the write lock: another process may have won.
                if conn.execute("SELECT 1 FROM migrations WHERE name = ?", (name,)).fetchone():
                    continue
                for statement in ddl.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    "INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (name, utcnow())
                )

    def data_version(self) -> int:
        """Changes whenever another process commits. Asked of the writer on purpose:
        `PRAGMA data_version` moves for commits by *other* connections, so on a
        read connection this process's own job-queue traffic would look like a
        foreign commit and empty the metadata cache; this process's publishes
        invalidate it directly instead."""
        with self._lock:
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def table_names(self) -> list[str]:
        with self._reader() as conn:
            # Imported here, not at start-up: sqlite-utils brings click, dateutil
            # and pygments, about 4 MiB a server worker does not need.
            import sqlite_utils

            return list(sqlite_utils.Database(conn).table_names())

    def check_writable(self) -> None:
        """For /readyz: a write transaction can be opened and committed."""
        with self._write() as conn:
            conn.execute("SELECT 1")

    def backup(self, target: Path) -> None:
        """A consistent copy of the index at `target`, checked before it is kept:
        written under a `.partial` name and renamed only once SQLite's
        integrity_check passes, so `target` is whole or absent (S4)."""
        partial = target.with_name(target.name + ".partial")
        partial.unlink(missing_ok=True)
        self._online_copy(partial)
        verdict = _integrity_check(partial)
        if verdict != "ok":
            raise ConfigError(f"backup failed its integrity check: {verdict}")
        os.replace(partial, target)

    def _online_copy(self, target: Path) -> None:
        """SQLite's online backup API: consistent while the server keeps writing (S4)."""
        dest = sqlite3.connect(target)
        try:
            with self._lock:
                self._conn.backup(dest)
        finally:
            dest.close()

    # -- repositories -------------------------------------------------------

    def add_repo(self, url: str, forge_repo: str, webhook_secret: str = "") -> RepoRecord:
        """Get or create the repository with this URL."""
        with self._write() as conn:
            conn.execute(
                "INSERT INTO repos (url, forge_repo, webhook_secret, created_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT(url) DO NOTHING",
                (url, forge_repo, webhook_secret, utcnow()),
            )
            if webhook_secret:
                conn.execute(
                    "UPDATE repos SET webhook_secret = ? WHERE url = ?", (webhook_secret, url)
                )
        return self.repo_by_url(url)

    def repo_by_url(self, url: str) -> RepoRecord:
        rows = self._rows("SELECT * FROM repos WHERE url = ?", (url,))
        if not rows:
            raise NotFound(f"no repository {url}")
        return _repo(rows[0])

    def repo(self, repo_id: int) -> RepoRecord:
        rows = self._rows("SELECT * FROM repos WHERE id = ?", (repo_id,))
        if not rows:
            raise NotFound(f"no repository #{repo_id}")
        return _repo(rows[0])

    def repos(self) -> list[RepoRecord]:
        return [
            _repo(r) for r in self._rows("SELECT * FROM repos WHERE removed_at IS NULL ORDER BY id")
        ]

    def repos_by_forge_name(self, forge_repo: str) -> list[RepoRecord]:
        rows = self._rows(
            "SELECT * FROM repos WHERE lower(forge_repo) = lower(?) AND removed_at IS NULL"
            " ORDER BY id",
            (forge_repo,),
        )
        return [_repo(r) for r in rows]

    def record_fetch(self, repo_id: int, error: str) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE repos SET last_fetch_at = ?, last_fetch_error = ? WHERE id = ?",
                (utcnow(), error, repo_id),
            )

    # -- modules ------------------------------------------------------------

    def add_module(
        self, repo_id: int, namespace: str, name: str, system: str, subdir: str, tag_prefix: str
    ) -> ModuleRecord:
        """Register a module address for a repository; the address is unique."""
        with self._write() as conn:
            link_module(conn, repo_id, namespace, name, system, subdir, tag_prefix)
        module = self.find_module(namespace, name, system)
        assert module is not None
        return module

    def find_module(self, namespace: str, name: str, system: str) -> ModuleRecord | None:
        rows = self._rows(
            "SELECT * FROM modules WHERE address_key = ?", (address_key(namespace, name, system),)
        )
        return _module(rows[0]) if rows else None

    def modules(self) -> list[ModuleRecord]:
        rows = self._rows("SELECT * FROM modules ORDER BY address_key")
        return [_module(r) for r in rows]

    def modules_of_repo(self, repo_id: int) -> list[ModuleRecord]:
        rows = self._rows("SELECT * FROM modules WHERE repo_id = ? ORDER BY id", (repo_id,))
        return [_module(r) for r in rows]

    def record_sync(self, module_id: int, report_json: str) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE modules SET last_sync_at = ?, sync_report = ? WHERE id = ?",
                (utcnow(), report_json, module_id),
            )

    # -- versions -----------------------------------------------------------

    def versions(self, module_id: int) -> list[VersionRecord]:
        rows = self._rows(
            "SELECT * FROM module_versions WHERE module_id = ? ORDER BY id", (module_id,)
        )
        return [_version(r) for r in rows]

    def version_by_key(self, module_id: int, version_key: str) -> VersionRecord | None:
        rows = self._rows(
            "SELECT * FROM module_versions WHERE module_id = ? AND version_key = ?",
            (module_id, version_key),
        )
        return _version(rows[0]) if rows else None

    def publish_version(self, new: NewVersion) -> bool:
        """Record a version in one transaction; False if that version already exists.

        The archive blob is already durable in the blob store (S2), so a crash
        before COMMIT leaves at most an unreferenced blob, never a version
        without bytes.
        """
        with self._write() as conn:
            conn.execute(
                "INSERT INTO archives (tree_sha, mtime, sha256, size) VALUES (?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (new.tree_sha, new.archive_mtime, new.archive_sha256, new.archive_size),
            )
            cursor = conn.execute(
                "INSERT INTO module_versions (module_id, version, version_key, tag, tag_sha,"
                " commit_sha, tree_sha, archive_sha256, archive_size, published_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    new.module_id,
                    new.version,
                    new.version_key,
                    new.tag,
                    new.tag_sha,
                    new.commit_sha,
                    new.tree_sha,
                    new.archive_sha256,
                    new.archive_size,
                    utcnow(),
                ),
            )
            return cursor.rowcount == 1

    def set_yanked(self, module_id: int, version_key: str, yanked: bool) -> None:
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE module_versions SET yanked = ? WHERE module_id = ? AND version_key = ?",
                (int(yanked), module_id, version_key),
            )
            if cursor.rowcount == 0:
                raise NotFound(f"no version {version_key}")

    def archive_for_tree(self, tree_sha: str, mtime: int) -> tuple[str, int] | None:
        """An archive already built from this tree and mtime (A5: build once)."""
        rows = self._rows(
            "SELECT sha256, size FROM archives WHERE tree_sha = ? AND mtime = ?", (tree_sha, mtime)
        )
        return (rows[0]["sha256"], rows[0]["size"]) if rows else None

    # -- conflicts ----------------------------------------------------------

    def record_conflict(
        self, module_id: int, version: str, tag: str, published: str, seen: str, reason: str
    ) -> bool:
        """Remember a tag that disagrees with a published version; True if new."""
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO module_conflicts (module_id, version, tag, published_commit,"
                " seen_commit, reason, first_seen) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (module_id, version, tag, published, seen, reason, utcnow()),
            )
            return cursor.rowcount == 1

    def conflicts(self, module_id: int | None = None) -> list[ConflictRecord]:
        if module_id is None:
            rows = self._rows("SELECT * FROM module_conflicts ORDER BY id")
        else:
            rows = self._rows(
                "SELECT * FROM module_conflicts WHERE module_id = ? ORDER BY id", (module_id,)
            )
        return [_conflict(r) for r in rows]


class IndexBackedStore:
    """Base for the feature stores (jobs, providers, mirror, auth): their writes
    run on the index's writer connection and lock, so they are not mistaken for
    another process's commit by the metadata cache, and every write is
    `BEGIN IMMEDIATE` like the index's own; their reads use the read pool."""

    def __init__(self, index: SQLiteIndex) -> None:
        self._index = index

    def _write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self._index._write()

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        return self._index._rows(sql, params)


R = TypeVar("R")


def from_row(cls: type[R], row: sqlite3.Row, **converted: Any) -> R:
    """A record from a row whose columns carry the record's field names; fields
    that need converting (JSON, booleans, renamed columns) are passed explicitly."""
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    values = {n: converted[n] if n in converted else row[n] for n in names}
    return cls(**values)


def _repo(row: sqlite3.Row) -> RepoRecord:
    return from_row(RepoRecord, row)


def _module(row: sqlite3.Row) -> ModuleRecord:
    return from_row(ModuleRecord, row)


def _version(row: sqlite3.Row) -> VersionRecord:
    return from_row(VersionRecord, row, yanked=bool(row["yanked"]))


def _conflict(row: sqlite3.Row) -> ConflictRecord:
    return from_row(ConflictRecord, row)

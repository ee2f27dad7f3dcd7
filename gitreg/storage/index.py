"""The module index: repositories, modules, versions and conflicts.

Every SQL statement in gitreg lives in this package, written once for both
engines (gitreg/storage/database.py): SQLite by default, PostgreSQL for
scale-out. The feature stores (jobs, providers, mirror, auth) share the
`Index`'s database through `IndexBackedStore`.
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from gitreg.errors import ConfigError, Conflict, NotFound
from gitreg.storage.attached import leave_attached
from gitreg.storage.database import (
    Connection,
    Database,
    Dialect,
    Params,
    Row,
    is_postgres_url,
)
from gitreg.storage.records import (
    ConflictRecord,
    ModuleGlob,
    ModuleRecord,
    NewVersion,
    RepoRecord,
    VersionRecord,
)
from gitreg.storage.sqlite import SQLiteDatabase


def utcnow() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def address_key(namespace: str, name: str, system: str) -> str:
    """Terraform keeps the user's case in paths; we match case-insensitively."""
    return f"{namespace}/{name}/{system}".lower()


def link_module(
    conn: Connection,
    repo_id: int,
    namespace: str,
    name: str,
    system: str,
    subdir: str,
    tag_prefix: str,
    archive_scope: str = "repository",
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
            " subdir, tag_prefix, archive_scope, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (repo_id, namespace, name, system, key, subdir, tag_prefix, archive_scope, utcnow()),
        )
    elif tuple(existing) != (repo_id, subdir, tag_prefix):
        raise Conflict(
            f"module {namespace}/{name}/{system} is already registered"
            " with another repository, subdirectory or tag prefix"
        )


class Index:
    """The module index on a `Database`; the feature stores share its database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @property
    def dialect(self) -> Dialect:
        return self.db.dialect

    def close(self) -> None:
        self.db.close()

    def _write(
        self, notify: bool = True, exclusive: bool = True
    ) -> AbstractContextManager[Connection]:
        return self.db.write(notify, exclusive)

    def _rows(self, sql: str, params: Params = ()) -> list[Row]:
        return self.db.rows(sql, params)

    def data_version(self) -> int:
        return self.db.data_version()

    def table_names(self) -> list[str]:
        return self.db.table_names()

    def check_writable(self) -> None:
        """For /readyz: a write transaction could commit now (`Database`)."""
        self.db.check_writable()

    def backup(self, target: Path) -> None:
        self.db.backup(target)

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
        self,
        repo_id: int,
        namespace: str,
        name: str,
        system: str,
        subdir: str,
        tag_prefix: str,
        archive_scope: str = "repository",
    ) -> ModuleRecord:
        """Register a module address for a repository; the address is unique."""
        with self._write() as conn:
            link_module(conn, repo_id, namespace, name, system, subdir, tag_prefix, archive_scope)
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

        The archive blob is already durable in the blob store, so a crash
        before COMMIT leaves at most an unreferenced blob, never a version
        without bytes.
        """
        with self._write() as conn:
            _record_archive(conn, new)
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
            if cursor.rowcount != 1:
                leave_attached()  # no publish happened here
                return False
            return True

    def set_yanked(self, module_id: int, version_key: str, yanked: bool) -> None:
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE module_versions SET yanked = ? WHERE module_id = ? AND version_key = ?",
                (int(yanked), module_id, version_key),
            )
            if cursor.rowcount == 0:
                raise NotFound(f"no version {version_key}")

    def set_deprecation(
        self,
        module_id: int,
        version_key: str,
        reason: str | None,
        link: str = "",
    ) -> None:
        """Deprecate a version (reason given) or lift its deprecation (None); an
        ordinary write, noticed by serving processes as a publish is."""
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE module_versions SET deprecation_reason = ?, deprecation_link = ?"
                " WHERE module_id = ? AND version_key = ?",
                (reason, link if reason is not None else "", module_id, version_key),
            )
            if cursor.rowcount == 0:
                raise NotFound(f"no version {version_key}")

    def archive_for_tree(self, tree_sha: str, mtime: int) -> tuple[str, int] | None:
        """An archive already built from this tree and mtime (build once)."""
        rows = self._rows(
            "SELECT sha256, size FROM archives WHERE tree_sha = ? AND mtime = ?", (tree_sha, mtime)
        )
        return (rows[0]["sha256"], rows[0]["size"]) if rows else None

    def archive_for_subtree(self, subtree_sha: str, subdir: str) -> tuple[str, int] | None:
        """An archive of this directory at this path, built for an earlier tag."""
        rows = self._rows(
            "SELECT sha256, size FROM subtree_archives WHERE subtree_sha = ? AND subdir = ?",
            (subtree_sha, subdir),
        )
        return (rows[0]["sha256"], rows[0]["size"]) if rows else None

    def archive_builder(self, sha256: str) -> str | None:
        """The builder recorded with an archive (gitreg/archives/format.py), or None."""
        rows = self._rows(
            "SELECT builder FROM archives WHERE sha256 = ?"
            " UNION ALL SELECT builder FROM subtree_archives WHERE sha256 = ?",
            (sha256, sha256),
        )
        return str(rows[0]["builder"]) if rows else None

    def module_globs(self, repo_id: int) -> list[ModuleGlob]:
        """The `--modules` patterns of a repository, oldest first."""
        rows = self._rows(
            "SELECT * FROM module_globs WHERE repo_id = ? ORDER BY created_at, pattern", (repo_id,)
        )
        return [from_row(ModuleGlob, r) for r in rows]

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
    run on the index's database, serialised with every other writer like the
    index's own, and their reads are single statements."""

    def __init__(self, index: Index) -> None:
        self._index = index

    @property
    def _dialect(self) -> Dialect:
        return self._index.dialect

    def _write(
        self, notify: bool = True, exclusive: bool = True
    ) -> AbstractContextManager[Connection]:
        return self._index._write(notify, exclusive)

    def _rows(self, sql: str, params: Params = ()) -> list[Row]:
        return self._index._rows(sql, params)

    def _tuples(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        return self._index.db.tuples(sql, params)


class SQLiteIndex(Index):
    """The embedded default: the index in one SQLite file."""

    def __init__(self, path: Path) -> None:
        super().__init__(SQLiteDatabase(path))

    @property
    def _conn(self) -> Any:
        """The writer connection (tests inspect it)."""
        assert isinstance(self.db, SQLiteDatabase)
        return self.db.conn


def open_index(database_url: str, sqlite_path: Path, pool_size: int = 10) -> Index:
    """The index the settings name: PostgreSQL for a `postgresql://` URL, else
    the embedded SQLite file. psycopg is imported only in the first case."""
    if not database_url:
        return SQLiteIndex(sqlite_path)
    if not is_postgres_url(database_url):
        raise ConfigError(
            "database_url must be postgresql://USER:PASS@HOST:PORT/DB (or unset for SQLite)",
            user_input=True,
        )
    from gitreg.storage.postgres import PostgresDatabase

    return Index(PostgresDatabase(database_url, pool_size))


R = TypeVar("R")


def from_row(cls: type[R], row: Row, **converted: Any) -> R:
    """A record from a row whose columns carry the record's field names; fields
    that need converting (JSON, booleans, renamed columns) are passed explicitly."""
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    values = {n: converted[n] if n in converted else row[n] for n in names}
    return cls(**values)


def _record_archive(conn: Connection, new: NewVersion) -> None:
    """Keep the archive's key, bytes and builder, for later versions of the same tree."""
    if new.archive_subtree:
        conn.execute(
            "INSERT INTO subtree_archives (subtree_sha, subdir, mtime, sha256, size, builder)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                new.archive_subtree,
                new.archive_subdir,
                new.archive_mtime,
                new.archive_sha256,
                new.archive_size,
                new.archive_builder,
            ),
        )
        return
    conn.execute(
        "INSERT INTO archives (tree_sha, mtime, sha256, size, builder) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT DO NOTHING",
        (
            new.tree_sha,
            new.archive_mtime,
            new.archive_sha256,
            new.archive_size,
            new.archive_builder,
        ),
    )


def _repo(row: Row) -> RepoRecord:
    return from_row(RepoRecord, row)


def _module(row: Row) -> ModuleRecord:
    return from_row(ModuleRecord, row)


def _version(row: Row) -> VersionRecord:
    return from_row(VersionRecord, row, yanked=bool(row["yanked"]))


def _conflict(row: Row) -> ConflictRecord:
    return from_row(ConflictRecord, row)

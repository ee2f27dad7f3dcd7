"""A read-only look at the index's schema, for `gitreg doctor`.

Opening the index normally applies pending migrations and refuses a newer
schema (gitreg/storage/migrations.py); a diagnosis must do neither, so this
reads the `migrations` table alone: SQLite opened read-only, PostgreSQL with
one short connection and a single SELECT.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from gitreg.errors import ConfigError
from gitreg.storage.database import is_postgres_url
from gitreg.storage.migrations import names

# Seconds to wait for PostgreSQL; a doctor should answer quickly.
CONNECT_TIMEOUT = 5


@dataclass(frozen=True)
class SchemaStatus:
    where: str  # the SQLite path or the redacted PostgreSQL URL
    exists: bool  # False: no index yet (created on first use)
    missing: tuple[str, ...]  # migrations this gitreg knows but were not applied (older)
    unknown: tuple[str, ...]  # migrations applied by a newer gitreg

    @property
    def current(self) -> bool:
        return self.exists and not self.missing and not self.unknown


def _status(where: str, applied: set[str] | None) -> SchemaStatus:
    if applied is None:
        return SchemaStatus(where, False, (), ())
    known = names()
    missing = tuple(name for name in known if name not in applied)
    return SchemaStatus(where, True, missing, tuple(sorted(applied - set(known))))


def _sqlite_applied(path: Path) -> set[str] | None:
    if not path.is_file():
        return None
    # mode=ro: never creates, migrates or takes a write lock on a live index.
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=5)
    try:
        table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'migrations'"
        ).fetchone()
        if table is None:
            return None
        return {str(row[0]) for row in conn.execute("SELECT name FROM migrations")}
    finally:
        conn.close()


def _postgres_applied(url: str) -> set[str] | None:
    import psycopg

    from gitreg.storage.postgres import unavailable_is_503

    with (
        unavailable_is_503(url),
        psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn,
    ):
        found = conn.execute("SELECT to_regclass('migrations')").fetchone()
        if found is None or found[0] is None:
            return None
        return {str(row[0]) for row in conn.execute("SELECT name FROM migrations")}


def schema_status(database_url: str, sqlite_path: Path) -> SchemaStatus:
    """The index's migrations against this gitreg's; raises DatabaseUnavailable
    when PostgreSQL cannot be reached, ConfigError for an unreadable SQLite file."""
    if database_url:
        if not is_postgres_url(database_url):
            raise ConfigError("database_url must be postgresql://USER:PASS@HOST:PORT/DB")
        from gitreg.storage.postgres import redact

        return _status(redact(database_url), _postgres_applied(database_url))
    try:
        return _status(str(sqlite_path), _sqlite_applied(sqlite_path))
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot read the index at {sqlite_path}: {exc}") from exc

"""The seam between gitreg's SQL and the engine that runs it.

Every store writes its SQL once, in the dialect both engines share: `?` and
`:name` placeholders, `INSERT ... ON CONFLICT`, `RETURNING`, no engine-only
functions. A `Database` runs it on SQLite (gitreg/storage/sqlite.py, the
embedded default) or PostgreSQL (gitreg/storage/postgres.py, scale-out);
the few statements that must differ (the job claim's row locks) ask
`dialect`.

Both give the same guarantees to the stores above them:
- `write()` is one transaction, serialised with every other writer of the
  same database, from any process or replica (SQLite's `BEGIN IMMEDIATE`,
  PostgreSQL's transaction-scoped advisory lock), so read-then-write logic in
  a store needs no retry loop;
- `rows()` is one statement in its own read transaction, seeing every commit
  made before it started;
- `data_version()` moves when another process or replica committed a change
  that metadata caches must see, and costs no database round trip.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

Dialect = Literal["sqlite", "postgresql"]
Params = Sequence[Any] | Mapping[str, Any]


class Row(Protocol):
    """A result row, by position or by column name (like `sqlite3.Row`)."""

    def __getitem__(self, key: Any, /) -> Any: ...

    def keys(self) -> list[str]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """What a store may do inside `Database.write()`."""

    def execute(self, sql: str, parameters: Params = (), /) -> Cursor: ...


class Database(Protocol):
    dialect: Dialect

    def write(
        self, notify: bool = True, exclusive: bool = True
    ) -> contextlib.AbstractContextManager[Connection]:
        """One write transaction. `notify=False` for bookkeeping that no metadata
        cache shows (job leases, schedules), so queue traffic does not empty the
        caches of every replica. `exclusive=False` (PostgreSQL) skips the
        database-wide write lock for a transaction that locks its own rows."""
        ...

    def rows(self, sql: str, params: Params = ()) -> list[Row]: ...

    def tuples(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """`rows()` as plain tuples, for reads of many rows (search): an exact
        tuple of ints and strings leaves the garbage collector's lists at its
        first pass, where a row object that can be read by name stays tracked
        and, by the thousand per search, set off full collections of the
        process (docs/performance.md, "Search: fewer rows ranked")."""
        ...

    def data_version(self) -> int: ...

    def check_writable(self) -> None:
        """For /readyz: raise (`DatabaseUnavailable`, `StorageFull`, ...) unless a
        write transaction could commit now. Never waits long on a database
        that is down: PostgreSQL answers from its change feed's last poll."""
        ...

    def table_names(self) -> list[str]: ...

    def backup(self, target: Path) -> None:
        """A consistent copy of the index at `target` (SQLite only: a PostgreSQL
        database is backed up with its own tools)."""
        ...

    def close(self) -> None: ...


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))

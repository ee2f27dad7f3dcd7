"""Copying a registry's storage into other backends (`gitreg migrate-storage`).

Blobs go first, each verified by its sha256 as the target stored it, and the
index after them: a copied version row then always finds its archive (the
same order a publish keeps). Both steps only add what the target
lacks, keyed by content (blobs) and by primary key (rows), so a copy that was
interrupted, or one run again after the source kept serving, picks up where
it stopped and copies each thing once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from gitreg.errors import ConfigError
from gitreg.storage.blobs import BlobStore
from gitreg.storage.index import Index
from gitreg.storage.migrations import MIGRATIONS
from gitreg.storage.protocols import ModuleIndex

Progress = Callable[[str, int, int], None]  # (what, done, total)
_CREATED = re.compile(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", re.IGNORECASE)
_BATCH = 500


@dataclass
class CopyReport:
    blobs_copied: int = 0
    blobs_present: int = 0
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows added


def tables_in_order() -> list[str]:
    """Every table of the schema, each after the tables it references: the
    order the migrations created them in."""
    return [
        name
        for _, ddl in MIGRATIONS["sqlite"]
        for name in _CREATED.findall(ddl)
        if name not in DERIVED_TABLES
    ]


# Built from other tables, in an engine's own shape (FTS5 on SQLite, a generated
# tsvector on PostgreSQL, and module_search_words filled from it by a trigger,
# migration 0022): not copied; `gitreg reindex` rebuilds them.
DERIVED_TABLES = frozenset({"module_search", "module_search_words"})


def copy_blobs(
    source: BlobStore, target: BlobStore, report: CopyReport, progress: Progress
) -> None:
    names = sorted(source.names())
    for done, sha256 in enumerate(names, start=1):
        if target.exists(sha256):
            report.blobs_present += 1
        else:
            _copy_blob(source, target, sha256)
            report.blobs_copied += 1
        progress("blobs", done, len(names))


def _copy_blob(source: BlobStore, target: BlobStore, sha256: str) -> None:
    with source.open(sha256) as reader, target.writer() as sink:
        while chunk := reader.read(1024 * 1024):
            sink.write(chunk)
    stored = sink.result
    if stored is None or stored.sha256 != sha256:
        # The source's bytes no longer match their name: never copy corruption.
        raise ConfigError(f"blob {sha256} does not match its sha256 in the source store")


def copy_index(
    source: ModuleIndex, target: ModuleIndex, report: CopyReport, progress: Progress
) -> None:
    assert isinstance(source, Index) and isinstance(target, Index)  # both open_index()'s
    present = set(source.table_names())
    tables = [t for t in tables_in_order() if t in present]
    for number, table in enumerate(tables, start=1):
        report.rows[table] = sum(_copy_table(source, target, table))
        progress("tables", number, len(tables))
    if target.dialect == "postgresql":
        _advance_identities(target, tables)


def _copy_table(source: Index, target: Index, table: str) -> Iterator[int]:
    """Rows the target lacks, in batches of one transaction each; yields how
    many each batch added."""
    rows = source._rows(f"SELECT * FROM {table}")  # noqa: S608 (names from our schema)
    for start in range(0, len(rows), _BATCH):
        batch = rows[start : start + _BATCH]
        columns = list(batch[0].keys())
        sql = (
            f"INSERT INTO {table} ({', '.join(columns)})"  # noqa: S608
            f" VALUES ({', '.join('?' * len(columns))}) ON CONFLICT DO NOTHING"
        )
        added = 0
        with target._write() as conn:
            for row in batch:
                added += conn.execute(sql, tuple(row)).rowcount
        yield added


def _advance_identities(target: Index, tables: list[str]) -> None:
    """Rows were copied with their ids; the identity sequences must start
    after them, or the target's next insert would collide."""
    with target._write() as conn:
        for table in tables:
            has_id = conn.execute(
                "SELECT 1 FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND table_name = ? AND column_name = 'id'",
                (table,),
            ).fetchone()
            if has_id is not None:
                conn.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"  # noqa: S608
                    f" (SELECT coalesce(max(id), 0) + 1 FROM {table}), false)"
                )

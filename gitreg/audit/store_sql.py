"""All SQL of the audit log (migration `0032-audit-log`).

Rows are only ever added, and removed by `prune` once older than the
retention. No write here notifies the metadata caches: a row is not metadata.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from gitreg.audit.store import AuditEntry, AuditQuery
from gitreg.storage.attached import Attached, attach
from gitreg.storage.database import Connection
from gitreg.storage.index import IndexBackedStore

_COLUMNS = "at, actor_kind, actor, rule, action, object, result, client, request_id, detail"
_INSERT = (
    f"INSERT INTO audit_log ({_COLUMNS})"  # noqa: S608 - fixed column names
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)


def _values(entry: AuditEntry) -> tuple[Any, ...]:
    return (
        entry.at,
        entry.actor_kind,
        entry.actor,
        entry.rule,
        entry.action,
        entry.object,
        entry.result,
        entry.client,
        entry.request_id,
        entry.detail,
    )


def _like(text: str) -> str:
    """A LIKE pattern matching `text` literally anywhere."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _glob(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


class AuditStore(IndexBackedStore):
    def add(self, entry: AuditEntry) -> int:
        with self._write(notify=False) as conn:
            return int(conn.execute(_INSERT, _values(entry)).fetchone()[0])

    def add_if_changed(self, entry: AuditEntry) -> bool:
        # The write lock of both engines makes the check and the insert one step,
        # so processes starting together record a change once.
        with self._write(notify=False) as conn:
            newest = conn.execute(
                "SELECT detail FROM audit_log WHERE action = ? ORDER BY id DESC LIMIT 1",
                (entry.action,),
            ).fetchone()
            if newest is not None and newest[0] == entry.detail:
                return False
            conn.execute(_INSERT, _values(entry)).fetchone()
            return True

    @contextlib.contextmanager
    def attach(self, entry: AuditEntry) -> Iterator[Attached]:
        def write(conn: Connection) -> None:
            conn.execute(_INSERT, _values(entry)).fetchone()

        with attach(write) as attached:
            yield attached

    def entries(self, query: AuditQuery) -> list[AuditEntry]:
        where: list[str] = []
        params: list[Any] = []
        if query.since is not None:
            where.append("at >= ?")
            params.append(query.since)
        if query.actor:
            where.append(
                "(lower(actor) LIKE lower(?) ESCAPE '\\' OR actor_kind = ?"
                " OR lower(rule) LIKE lower(?) ESCAPE '\\')"
            )
            params += [_like(query.actor), query.actor, _like(query.actor)]
        if query.action:
            # Actions are lower-case identifiers: the filter is too, so it matches
            # whatever its case on both engines (PostgreSQL's LIKE minds case,
            # SQLite's does not) and `action` stays a plain comparison.
            where.append("action LIKE ? ESCAPE '\\'")
            params.append(_glob(query.action.lower()))
        if query.object:
            where.append("lower(object) LIKE lower(?) ESCAPE '\\'")
            params.append(_like(query.object))
        if query.before_id is not None:
            where.append("id < ?")
            params.append(query.before_id)
        sql = f"SELECT id, {_COLUMNS} FROM audit_log"  # noqa: S608 - fixed column names
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC LIMIT ?"
        params.append(query.limit)
        return [
            AuditEntry(
                at=float(r[1]),
                actor_kind=str(r[2]),
                actor=str(r[3]),
                rule=str(r[4]),
                action=str(r[5]),
                object=str(r[6]),
                result=str(r[7]),
                client=str(r[8]),
                request_id=str(r[9]),
                detail=str(r[10]),
                id=int(r[0]),
            )
            for r in self._rows(sql, params)
        ]

    def prune(self, before: float) -> int:
        with self._write(notify=False) as conn:
            return int(conn.execute("DELETE FROM audit_log WHERE at < ?", (before,)).rowcount)

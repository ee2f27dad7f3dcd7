"""What the audit log needs from the index, and the rows it hands out."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Protocol

from gitreg.audit.times import iso
from gitreg.storage.attached import Attached


@dataclass(frozen=True)
class AuditEntry:
    at: float  # unix seconds
    actor_kind: str
    actor: str
    rule: str
    action: str
    object: str
    result: str  # ok | refused | failed
    client: str
    request_id: str
    detail: str
    id: int = 0  # set once stored

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "time": iso(self.at),
            "actor": {"kind": self.actor_kind, "name": self.actor, "rule": self.rule},
            "action": self.action,
            "object": self.object,
            "result": self.result,
            "client": self.client,
            "request_id": self.request_id,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class AuditQuery:
    """Rows newest first; each given field narrows them (None: any)."""

    since: float | None = None
    actor: str | None = None  # a part of the actor's name, its kind or its rule
    action: str | None = None  # exact, or a glob with * ("token.*"), in any case
    object: str | None = None  # a part of the object
    before_id: int | None = None  # the next page: rows older than this id
    limit: int = 100


class AuditIndex(Protocol):
    def add(self, entry: AuditEntry) -> int:
        """Store one row in a transaction of its own; its id."""
        ...

    def attach(self, entry: AuditEntry) -> contextlib.AbstractContextManager[Attached]:
        """Store `entry` in the first write transaction opened inside the block
        (gitreg/storage/attached.py): it commits with that action or not at all."""
        ...

    def add_if_changed(self, entry: AuditEntry) -> bool:
        """Store `entry` unless the newest row of its action has the same detail,
        checked and written in one transaction; whether it was stored."""
        ...

    def entries(self, query: AuditQuery) -> list[AuditEntry]: ...

    def prune(self, before: float) -> int:
        """Remove rows older than `before`; how many."""
        ...

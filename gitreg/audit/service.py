"""`AuditLog`: the one way features record who did what (docs/audit.md).

Every sign-in, token made or revoked, publish, yank, deprecation, visibility
change, key change, repository change and admin action is one row: when,
who (`gitreg.audit.actor`: an operator, a token, a person, a workload
identity with the rules it matched), the action, its object, the result, the
client's address and the request id. Each row is also one log line of the
`gitreg.audit` logger.

`recording(action, object)` wraps the call that makes the action's write: the
row is stored in that same transaction (gitreg/storage/attached.py), so an
action and its row commit together or not at all. When the action fails, a
row saying so is stored on its own; when it writes nothing (a change that
was already so), the row is stored on its own as done. `record` stores a row
for what has no write of its own (a refused sign-in, a token exchanged).
Rows older than `audit_retention_days` are pruned by `prune`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gitreg import logs
from gitreg.audit import actor as actors
from gitreg.audit.actor import Actor
from gitreg.audit.store import AuditEntry, AuditIndex, AuditQuery
from gitreg.errors import GitregError
from gitreg.storage.attached import Attached

log = logging.getLogger("gitreg.audit")

MAX_PAGE = 1000
MAX_TEXT = 500  # characters kept of an object or detail


class AuditLog:
    def __init__(
        self,
        store: AuditIndex,
        retention_days: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._retention = retention_days * 86400
        self._clock = clock

    def _entry(
        self, action: str, obj: str, result: str, detail: str, who: Actor | None
    ) -> AuditEntry:
        who = who or actors.current()
        return AuditEntry(
            at=self._clock(),
            actor_kind=who.kind,
            actor=who.name[:MAX_TEXT],
            rule=who.rule[:MAX_TEXT],
            action=action,
            object=obj[:MAX_TEXT],
            result=result,
            client=who.client[:100],
            request_id=(logs.request_id.get() or "")[:100],
            detail=detail[:MAX_TEXT],
        )

    def record(
        self,
        action: str,
        obj: str,
        *,
        result: str = "ok",
        detail: str = "",
        who: Actor | None = None,
    ) -> None:
        """Store one row in a transaction of its own. Blocking."""
        entry = self._entry(action, obj, result, detail, who)
        self._store.add(entry)
        _log(entry)

    @contextlib.contextmanager
    def recording(
        self, action: str, obj: str, *, detail: str = "", who: Actor | None = None
    ) -> Iterator[None]:
        """Record the action the block performs, in its first write transaction. Blocking."""
        entry = self._entry(action, obj, "ok", detail, who)
        try:
            with self._store.attach(entry) as attached:
                yield
        except BaseException as exc:
            if not attached.ran:
                reason = (
                    exc.public_message() if isinstance(exc, GitregError) else type(exc).__name__
                )
                failed = self._entry(action, obj, "failed", reason, who)
                with contextlib.suppress(GitregError):  # the action's own error is the one raised
                    self._store.add(failed)
                _log(failed)
            raise
        if not attached.ran:
            self._store.add(entry)
        _log(entry)

    def note_access_tables(self, tables: Mapping[str, object]) -> None:
        """Record `config.access` when the config file's access tables
        (`[[grants]]`, `[[workload_identity]]`) differ from the last recorded:
        they change by editing the file and restarting, so a start is where a
        change shows. Blocking."""
        canonical = json.dumps(tables, sort_keys=True, default=str).encode()
        counts = ", ".join(
            f"{len(v) if isinstance(v, list | tuple) else 0} [[{k}]]"
            for k, v in sorted(tables.items())
        )
        detail = f"{counts}; sha256 {hashlib.sha256(canonical).hexdigest()[:16]}"
        entry = self._entry("config.access", "config file", "ok", detail, actors.SYSTEM)
        if self._store.add_if_changed(entry):
            _log(entry)

    def entries(self, query: AuditQuery) -> list[AuditEntry]:
        """Rows newest first, at most MAX_PAGE. Blocking."""
        limit = min(max(query.limit, 1), MAX_PAGE)
        return self._store.entries(dataclasses.replace(query, limit=limit))

    def prune(self) -> int:
        """Remove the rows older than the retention; how many. Blocking."""
        return self._store.prune(self._clock() - self._retention)


class _Discarded:
    """The store of `UNRECORDED`: keeps nothing."""

    def add(self, entry: AuditEntry) -> int:
        return 0

    def attach(self, entry: AuditEntry) -> contextlib.AbstractContextManager[Attached]:
        return contextlib.nullcontext(Attached(lambda conn: None, ran=True))

    def add_if_changed(self, entry: AuditEntry) -> bool:
        return False

    def entries(self, query: AuditQuery) -> list[AuditEntry]:
        return []

    def prune(self, before: float) -> int:
        return 0


class _Unrecorded(AuditLog):
    def record(self, *args: Any, **kwargs: Any) -> None:
        pass

    @contextlib.contextmanager
    def recording(self, *args: Any, **kwargs: Any) -> Iterator[None]:
        yield


# For services built without a registry behind them (unit tests, the tools
# that only read): nothing recorded. `build_services` always passes the real log.
UNRECORDED: AuditLog = _Unrecorded(_Discarded(), 1)


def _log(entry: AuditEntry) -> None:
    fields = {f"audit_{k}": v for k, v in entry.to_json().items() if k not in ("id", "time")}
    log.info(
        "%s %s %s by %s",
        entry.action,
        entry.object,
        entry.result,
        entry.actor,
        extra={"fields": fields},
    )

"""Writes that ride along in an action's own write transaction.

An audit row must commit exactly when the action it records commits, on
SQLite and PostgreSQL alike. `attach(write)` queues `write` for the next write
transaction opened in this context (the thread, or the task and the worker
threads it starts); the engine runs it inside that transaction just before
it commits (`run_attached`), so both commit or neither does. The caller
learns from `Attached.ran` whether a transaction took it (an action that
wrote nothing, or failed before writing, leaves it to the caller).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gitreg.storage.database import Connection


@dataclass
class Attached:
    write: Callable[[Connection], None]
    ran: bool = False


_pending: contextvars.ContextVar[Attached | None] = contextvars.ContextVar(
    "gitreg_attached_write", default=None
)


@contextlib.contextmanager
def attach(write: Callable[[Connection], None]) -> Iterator[Attached]:
    """Run `write` in the first write transaction opened inside this block."""
    item = Attached(write)
    token = _pending.set(item)
    try:
        yield item
    finally:
        _pending.reset(token)


def run_attached(conn: Connection) -> None:
    """Called by the engines inside each write transaction, before it commits."""
    item = _pending.get()
    if item is not None and not item.ran:
        item.write(conn)
        item.ran = True

"""Writes that ride along in an action's own write transaction.

The one way a feature's rows commit exactly when another feature's action
commits, on SQLite and PostgreSQL alike: the audit row of an action, the
transparency log entry of a publish, yank or deprecation. Three parties:

- the feature that rides along wraps the call that performs the action in
  `attach(write)`. `write` runs inside the first write transaction opened
  in this context (the thread, or the task and the worker threads it starts)
  that performs something, just before it commits, so both commit or neither
  does. Blocks nest: an audit row and a log entry for one yank both ride in
  the yank's transaction, in the order they were attached. `Attached.ran`
  tells the caller afterwards whether a transaction took its write: an action
  that failed before writing, or wrote nothing, leaves it to the caller;
- the engines (sqlite.py, postgres.py) wrap the body of every write
  transaction in `carrying(conn)`, which runs the pending writes when the
  body returns (never when it raises) and the engine commits next;
- a store whose transaction turns out to perform nothing (a version that
  is already published) calls `leave_attached()` inside it: the pending
  writes do not run there.

A store never takes a write to run for another feature: it stays unaware of
who rides along.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gitreg.storage.database import Connection


@dataclass
class Attached:
    write: Callable[[Connection], object]
    ran: bool = False


@dataclass
class _Transaction:
    left: bool = False


_pending: contextvars.ContextVar[tuple[Attached, ...]] = contextvars.ContextVar(
    "gitreg_attached_writes", default=()
)
_open: contextvars.ContextVar[_Transaction | None] = contextvars.ContextVar(
    "gitreg_attached_transaction", default=None
)


@contextlib.contextmanager
def attach(write: Callable[[Connection], object]) -> Iterator[Attached]:
    """Run `write` in the first write transaction opened inside this block that
    performs something."""
    item = Attached(write)
    token = _pending.set((*_pending.get(), item))
    try:
        yield item
    finally:
        _pending.reset(token)


@contextlib.contextmanager
def carrying(conn: Connection) -> Iterator[None]:
    """The engines' part: wraps the body of each write transaction, `conn` its
    connection. When the body returns, the writes attached in this context
    that have not run yet run on `conn`, unless the body called
    `leave_attached()`."""
    transaction = _Transaction()
    token = _open.set(transaction)
    try:
        yield
    finally:
        _open.reset(token)
    if not transaction.left:
        for item in _pending.get():
            if not item.ran:
                item.write(conn)
                item.ran = True


def leave_attached() -> None:
    """Inside a write transaction whose action turned out not to happen: the
    attached writes do not run in it."""
    transaction = _open.get()
    if transaction is None:
        raise RuntimeError("leave_attached() outside a write transaction")
    transaction.left = True

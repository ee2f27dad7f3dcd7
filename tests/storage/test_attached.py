"""Writes attached to an action's transaction (gitreg/storage/attached.py), on
SQLite and PostgreSQL: several ride in one transaction and commit with it or
not at all, a transaction that performs nothing leaves them, the caller learns
whether they ran, and the context reaches a task's worker threads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from gitreg.errors import NotFound
from gitreg.storage.attached import attach, leave_attached
from gitreg.storage.database import Connection
from gitreg.storage.index import Index
from tests.support.backends import new_version

URL = "https://example.com/acme/net.git"


def _module(index: Index) -> int:
    repo = index.add_repo(URL, "acme/net")
    return index.add_module(repo.id, "acme", "net", "aws", "", "").id


def _note(text: str) -> Callable[[Connection], None]:
    """A write that leaves a row naming `text` (a conflict row of the module)."""

    def write(conn: Connection) -> None:
        conn.execute(
            "INSERT INTO module_conflicts (module_id, version, tag, published_commit,"
            " seen_commit, reason, first_seen)"
            " SELECT MIN(id), ?, ?, '', '', 'r', 'x' FROM modules",
            (text, text),
        )

    return write


def _notes(index: Index) -> list[str]:
    return sorted(c.version for c in index.conflicts())


def test_several_writes_ride_in_the_action_transaction_in_order(index: Index) -> None:
    module_id = _module(index)
    order: list[str] = []

    def first(conn: Connection) -> None:
        order.append("audit")
        _note("audit")(conn)

    with attach(first) as audit, attach(_note("log")) as log:
        assert index.publish_version(new_version(module_id))
        order.append("after")
        index.record_sync(module_id, "[]")  # a later transaction takes nothing
    assert audit.ran and log.ran
    assert order == ["audit", "after"]
    assert _notes(index) == ["audit", "log"]


def test_a_failing_action_takes_none_of_them(index: Index) -> None:
    module_id = _module(index)
    with attach(_note("audit")) as audit, attach(_note("log")) as log, pytest.raises(NotFound):
        index.set_yanked(module_id, "9.9.9", True)
    assert not audit.ran and not log.ran
    assert _notes(index) == []


def test_a_failing_attached_write_rolls_the_action_back(index: Index) -> None:
    module_id = _module(index)

    def failing(conn: Connection) -> None:
        raise RuntimeError("the log entry could not be made")

    with pytest.raises(RuntimeError), attach(_note("audit")), attach(failing):
        index.publish_version(new_version(module_id))
    assert index.versions(module_id) == []
    assert _notes(index) == []


def test_a_transaction_that_performs_nothing_leaves_them(index: Index) -> None:
    module_id = _module(index)
    assert index.publish_version(new_version(module_id))
    with attach(_note("log")) as log:
        assert not index.publish_version(new_version(module_id))  # already published
    assert not log.ran
    assert _notes(index) == []


def test_leave_attached_only_inside_a_write_transaction() -> None:
    with pytest.raises(RuntimeError):
        leave_attached()


def test_a_task_worker_thread_carries_them(index: Index) -> None:
    module_id = _module(index)

    async def action() -> bool:
        with attach(_note("audit")) as audit:
            await asyncio.to_thread(index.set_yanked, module_id, "1.0.0", True)
        return audit.ran

    assert index.publish_version(new_version(module_id))
    assert asyncio.run(action())
    assert _notes(index) == ["audit"]
    assert index.versions(module_id)[0].yanked

"""Single-flight: concurrent requests for one missing thing share one fetch."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class SingleFlight:
    """At most one run per key at a time; concurrent callers share its result."""

    def __init__(self) -> None:
        self._running: dict[Hashable, asyncio.Task[Any]] = {}

    async def run(self, key: Hashable, factory: Callable[[], Awaitable[T]]) -> T:
        task = self._running.get(key)
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            task = asyncio.ensure_future(factory())
            self._running[key] = task
            task.add_done_callback(lambda done: self._finished(key, done))
        # shield: a client that disconnects does not cancel the others' fetch.
        return await asyncio.shield(task)

    def _finished(self, key: Hashable, task: asyncio.Task[Any]) -> None:
        if self._running.get(key) is task:
            del self._running[key]
        if not task.cancelled():
            task.exception()  # retrieved, so an unawaited failure is not logged as lost

    def in_flight(self) -> int:
        return len(self._running)

"""Rate limiting of failed authentications per client address.

A client that presents more than `limit` bad tokens or signatures within
`window` seconds is answered 429 with Retry-After until the oldest failure
ages out, which makes guessing tokens impractical. In memory, per process.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque

from gitreg.errors import TooManyRequests

# A flood of distinct addresses must not grow memory without bound.
MAX_CLIENTS = 10_000

Table = OrderedDict[str, deque[float]]


class FailureLimiter:
    def __init__(self, limit: int, window: float, max_clients: int = MAX_CLIENTS) -> None:
        self._limit = limit
        self._window = window
        self._max_clients = max_clients
        # Both tables are ordered by last failure, oldest first. Clients at
        # their limit are kept apart so that a flood of new addresses evicts
        # the cheap entries (a few failures each) before it can free a
        # locked-out client: clearing everything once handed it fresh tries.
        self._counting: Table = OrderedDict()
        self._locked: Table = OrderedDict()

    def __len__(self) -> int:
        return len(self._counting) + len(self._locked)

    def _table(self, client: str) -> Table | None:
        if client in self._locked:
            return self._locked
        if client in self._counting:
            return self._counting
        return None

    def _recent(self, client: str, now: float) -> deque[float]:
        table = self._table(client)
        if table is None:
            return deque()
        stamps = table[client]
        while stamps and stamps[0] <= now - self._window:
            stamps.popleft()
        if not stamps:
            del table[client]
        return stamps

    def check(self, client: str, now: float | None = None) -> None:
        """Raise TooManyRequests while `client` is over its limit."""
        now = time.monotonic() if now is None else now
        stamps = self._recent(client, now)
        if len(stamps) >= self._limit:
            wait = math.ceil(stamps[0] + self._window - now)
            raise TooManyRequests(
                "too many failed authentication attempts; try again later", max(wait, 1)
            )

    def failed(self, client: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        stamps = self._recent(client, now)
        table = self._table(client)
        if table is None:
            self._make_room(now)
        else:
            del table[client]  # re-inserted last: it is now the newest failure
        stamps.append(now)
        target = self._locked if len(stamps) >= self._limit else self._counting
        target[client] = stamps

    def record(self, client: str, now: float | None = None) -> None:
        """Count one event that is not a failure against `client`: the same
        window and bounded table serve gitreg.auth.pending.SignInLimits."""
        self.failed(client, now)

    def _make_room(self, now: float) -> None:
        """Evict expired entries first, then the oldest counting, then the oldest locked."""
        for table in (self._counting, self._locked):
            while len(self) >= self._max_clients and table and self._expired(table, now):
                table.popitem(last=False)
        for table in (self._counting, self._locked):
            while len(self) >= self._max_clients and table:
                table.popitem(last=False)

    def _expired(self, table: Table, now: float) -> bool:
        oldest = next(iter(table.values()))
        return oldest[-1] <= now - self._window

"""Rate limiting of failed authentications per client address (issue 6).

A client that presents more than `limit` bad tokens or signatures within
`window` seconds is answered 429 with Retry-After until the oldest failure
ages out, which makes guessing tokens impractical. In memory, per process.
"""

from __future__ import annotations

import math
import time
from collections import deque

from gitreg.errors import TooManyRequests

# A flood of distinct addresses must not grow memory without bound.
MAX_CLIENTS = 10_000


class FailureLimiter:
    def __init__(self, limit: int, window: float) -> None:
        self._limit = limit
        self._window = window
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, client: str, now: float) -> deque[float]:
        stamps = self._failures.get(client)
        if stamps is None:
            return deque()
        while stamps and stamps[0] <= now - self._window:
            stamps.popleft()
        if not stamps:
            del self._failures[client]
        return stamps

    def check(self, client: str, now: float | None = None) -> None:
        """Raise TooManyRequests while `client` is over its limit."""
        now = now or time.monotonic()
        stamps = self._recent(client, now)
        if len(stamps) >= self._limit:
            wait = math.ceil(stamps[0] + self._window - now)
            raise TooManyRequests(
                "too many failed authentication attempts; try again later", max(wait, 1)
            )

    def failed(self, client: str, now: float | None = None) -> None:
        now = now or time.monotonic()
        if len(self._failures) >= MAX_CLIENTS and client not in self._failures:
            self._failures.clear()
        self._failures.setdefault(client, deque()).append(now)

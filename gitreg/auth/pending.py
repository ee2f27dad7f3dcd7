"""In-flight sign-in steps kept in the index, shared by `terraform login`
(gitreg.auth.login) and the web UI's sign-in (gitreg.auth.web_sign_in).

A step is a JSON object stored under `kind:sha256(secret)`: the database
never holds a usable state or code. Taking a step deletes it, so each is
used once even when two replicas race (`AuthIndex.take_login_state`).

A pending sign-in is written before anything is known about the visitor, so
`SignInLimits` bounds what anonymous visitors can write (docs/sign-in.md,
"Limits"): so many started per client address per `PENDING_TTL` (in memory,
per process, like the failed-authentication limit), and so many unexpired
rows in all (one bounded count of the index, so across replicas). Over either,
`SignInsBusy`: a 503 with Retry-After, as for any other capacity refusal.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import anyio.to_thread

from gitreg.auth.ratelimit import FailureLimiter
from gitreg.auth.store import AuthIndex
from gitreg.auth.tokens import token_hash
from gitreg.errors import GitregError, TooManyRequests

log = logging.getLogger("gitreg.auth.pending")

PENDING_TTL = 600.0  # time a person has to finish signing in at the issuer
# Seconds to wait when the index holds `sign_in_pending_max` sign-ins: rows
# expire continuously, so room comes back well within a minute unless a flood
# goes on, and then the limit is doing its job.
FULL_RETRY_AFTER = 60
WARN_EVERY = 60.0  # at most one log line a minute while full, not one per request


def step_key(kind: str, secret: str) -> str:
    return f"{kind}:{token_hash(secret)}"


async def put_step(
    store: AuthIndex, key: str, payload: dict[str, Any], ttl: float, now: float
) -> None:
    text = json.dumps(payload)
    await anyio.to_thread.run_sync(store.put_login_state, key, text, now + ttl, now)


async def take_step(store: AuthIndex, key: str, now: float) -> dict[str, Any] | None:
    text = await anyio.to_thread.run_sync(store.take_login_state, key, now)
    return None if text is None else dict(json.loads(text))


class SignInsBusy(GitregError):
    """No new sign-in now: too many started from this address, or in flight in
    all. Retryable, so 503 with `retry_after` (RFC 9110 15.6.4)."""

    status = 503

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class SignInLimits:
    """Shared by both sign-in flows of one process (`terraform login` and the
    web UI), so one address cannot use each flow's allowance in turn."""

    def __init__(self, store: AuthIndex, per_client: int, pending_max: int) -> None:
        self._store = store
        self._pending_max = pending_max
        # The window is the rows' lifetime: what one address started within
        # it is at most what it holds in the index.
        self._clients = FailureLimiter(per_client, PENDING_TTL)
        self._warned = -WARN_EVERY

    async def admit(self, client: str, now: float) -> None:
        """Count a new pending sign-in for `client` (the address gitreg logs:
        the proxy's forwarded one with `trust_forwarded`), or raise SignInsBusy."""
        self._check(client)  # before the index is asked: a flood costs no query
        run = anyio.to_thread.run_sync
        if await run(self._store.count_login_states, now, self._pending_max) >= self._pending_max:
            if time.monotonic() - self._warned >= WARN_EVERY:
                self._warned = time.monotonic()
                log.warning("%d sign-ins in flight (sign_in_pending_max)", self._pending_max)
            raise SignInsBusy(
                "too many sign-ins in progress; try again in a minute", FULL_RETRY_AFTER
            )
        # Again after the await, and recorded with no await in between: sign-ins
        # started together all passed the first check before any was recorded.
        self._check(client)
        self._clients.record(client)

    def _check(self, client: str) -> None:
        try:
            self._clients.check(client)
        except TooManyRequests as exc:
            raise SignInsBusy(
                "too many sign-ins started from your address; try again later",
                exc.retry_after,
            ) from None

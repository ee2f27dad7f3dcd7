"""A replica started while PostgreSQL is down waits for it instead of exiting.

`create_app` builds the Services at once when it can. When the shared index
cannot be reached (`DatabaseUnavailable` on PostgreSQL), the app starts
without them: /healthz answers, /readyz and every route that needs the index
answer 503 (`gitreg.api.services.services`), and a task of the app's lifespan
tries again every `RETRY_INTERVAL`, within the engine's own connect timeout,
until the database answers. Then the Services are installed and the app's
background work (jobs, cache watcher, cleaners) starts as it would have at
start-up. Any other error at start-up, or an SQLite index that cannot be
opened, still stops `serve` with one line. An error other than the outage
met while waiting (the database came back with a schema or a secret key this
replica refuses) is logged once, turns /readyz's reason into "cannot open the
index", and is retried like the outage: from there the replica cannot stop
with that one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool

from gitreg.errors import DatabaseUnavailable, GitregError
from gitreg.services import Services, build_services
from gitreg.settings import Settings

log = logging.getLogger("gitreg.startup")

# Seconds between two attempts to open the index while the database is down.
RETRY_INTERVAL = 1.0

Run = Callable[[Services], AbstractAsyncContextManager[None]]


def open_services(settings: Settings) -> Services | None:
    """The Services, or None when PostgreSQL cannot be reached yet."""
    try:
        return build_services(settings)
    except DatabaseUnavailable as exc:
        if not settings.database_url:
            raise
        log.warning("%s; answering 503 and retrying until it is back", exc)
        return None


def waiting_for(app: Starlette) -> str | None:
    """Why the app has no Services yet, in words naming no host, or None once
    it has them."""
    if app.state.services is not None:
        return None
    return str(getattr(app.state, "waiting_for", "the database is unavailable"))


@contextlib.asynccontextmanager
async def opened_later(app: Starlette, settings: Settings, run: Run) -> AsyncIterator[None]:
    """For the app's lifespan: open the Services in the background, install
    them in `app.state.services`, then run `run(services)` until the end."""
    task = asyncio.create_task(_open_then_run(app, settings, run))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _open_then_run(app: Starlette, settings: Settings, run: Run) -> None:
    opened: list[Services] = []
    logged: str | None = None
    app.state.waiting_for = "the database is unavailable (not reachable since start-up)"
    try:
        while not opened:
            await asyncio.sleep(RETRY_INTERVAL)
            failure = await run_in_threadpool(_try_open, settings, opened)
            if failure is not None and failure != logged:
                logged = failure
                log.error("cannot start: %s; retrying", failure)
                # The message may name the database's host: the log says it.
                app.state.waiting_for = "cannot open the index (the server log says why)"
    except asyncio.CancelledError:
        for services in opened:  # built while the server was stopping
            services.close()
        raise
    app.state.services = opened[0]
    log.info("the database answers: serving")
    async with run(opened[0]):
        await asyncio.Event().wait()  # until the lifespan ends and cancels this


def _try_open(settings: Settings, opened: list[Services]) -> str | None:
    """None when opened or the database is still down, else what went wrong."""
    try:
        opened.append(build_services(settings))
    except DatabaseUnavailable:
        return None
    except GitregError as exc:
        return str(exc)
    except Exception as exc:  # logged once by the caller, then retried
        return f"unexpected error opening the index: {exc!r}"
    return None

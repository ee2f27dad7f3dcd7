"""`create_app(settings)`: the one place where gitreg's HTTP surface is assembled."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from gitreg import logs
from gitreg.api import blobs, discovery, startup
from gitreg.api.body_deadline import BodyDeadline
from gitreg.api.responses import error_body, json_response
from gitreg.attestations import http as attestations
from gitreg.audit import http as audit
from gitreg.auth import http as login
from gitreg.auth.signed_urls import RECHECK_EVERY
from gitreg.catalog import http as browse
from gitreg.errors import (
    GitregError,
    ResponseCut,
    Unauthorized,
    log_level,
    operator_text,
    storage_full,
)
from gitreg.jobs import http as admin
from gitreg.metrics import http as metrics_api
from gitreg.metrics import service as metrics
from gitreg.mirror import http as mirror
from gitreg.modules import http as modules
from gitreg.oci import http as oci
from gitreg.providers import http as providers
from gitreg.semver_guard import http as semver_api
from gitreg.server import http as health
from gitreg.server.access_log import AccessLog
from gitreg.server.limits import limit_malloc_arenas
from gitreg.services import Services
from gitreg.settings import Settings, load_settings
from gitreg.ui import routes as ui
from gitreg.usage import http as usage_api
from gitreg.usage.counter import FLUSH_SECONDS
from gitreg.webhooks import http as webhooks

log = logging.getLogger("gitreg.app")

# nginx's "client closed request": the status the access log and the metrics
# record for a client that went away before its request body arrived whole.
CLIENT_GONE = 499


async def _gitreg_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GitregError)
    level = log_level(exc)
    if level is not None:
        log.log(level, "%s %s: %s", request.method, request.url.path, operator_text(exc))
    headers = {}
    # TooManyRequests, StorageFull, QueueUnavailable: say when to come back.
    retry_after = getattr(exc, "retry_after", None)
    if isinstance(retry_after, int):
        headers["Retry-After"] = str(retry_after)
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = 'Bearer realm="gitreg"'
    return json_response(error_body(exc.public_message()), status=exc.status, headers=headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404 and ui.wants_html(request):
        return await ui.html_not_found(request)  # a browser outside the API: a page
    return json_response(
        error_body(exc.detail), status=exc.status_code, headers=dict(exc.headers or {})
    )


async def _client_gone(request: Request, exc: Exception) -> Response:
    """Nothing failed here and nobody is left to answer: one info line, and a
    499 that only the access log and the metrics see (the server sends nothing
    on a closed connection)."""
    log.info(
        "%s %s: the client went away before sending its whole request body",
        request.method,
        request.url.path,
    )
    return Response(status_code=CLIENT_GONE)


async def _unexpected(request: Request, exc: Exception) -> Response:
    if isinstance(exc, ResponseCut):
        # Cut on purpose after the headers went out, and logged where it was cut:
        # nothing can be answered any more (this response is never sent).
        return Response(status_code=500)
    # A full disk met outside the storage layer (a git fetch, a staged upload,
    # a temp file) is still the operator's "free space and retry", not a 500.
    if (full := storage_full(exc, request.url.path)) is not None:
        return await _gitreg_error(request, full)
    # Never a traceback to the client; the log has it.
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return json_response(error_body("internal error"), status=500)


async def _until(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def _clean_staging_forever(svc: Services, stop: asyncio.Event) -> None:
    """Remove expired staged uploads and blob temp files while the server runs, not
    only at start: a publish token could otherwise fill the disk with uploads it
    never publishes. Runs off the event loop, until `stop` is set; a sweep under
    way is finished first, since it uses the index the shutdown closes."""
    ttl = svc.settings.staging_ttl
    while not stop.is_set():
        try:
            await run_in_threadpool(_clean_staging, svc, ttl)
        except Exception as exc:  # a failing sweep must not end the loop
            logs.failure(log, exc, "staging cleanup failed")
        await _until(stop, min(max(ttl / 4, 0.5), 60.0))


async def _note_access_tables(svc: Services) -> None:
    """An audit row when [[grants]] or [[workload_identity]] changed since the
    last start; a failure to write it does not stop the server."""
    settings = svc.settings
    tables = {"grants": settings.grants, "workload_identity": settings.workload_identity}
    try:
        await run_in_threadpool(svc.audit.note_access_tables, tables)
    except Exception as exc:
        logs.failure(log, exc, "cannot record the access tables in the audit log")


def _clean_staging(svc: Services, ttl: float) -> None:
    uploads = svc.providers.remove_stale_uploads()
    temps = svc.storage.remove_stale_temp_files(older_than=ttl)
    if uploads or temps:
        log.info("removed %d expired staged upload(s), %d blob temp file(s)", uploads, temps)
    pruned = svc.audit.prune()  # rows past audit_retention_days
    if pruned:
        log.info("pruned %d audit log row(s) past the retention", pruned)


async def _reload_signing_keys_forever(svc: Services, stop: asyncio.Event) -> None:
    """Learn URL-signing keys rotated by another process or replica, off the
    event loop (gitreg.auth.signed_urls): on PostgreSQL the look is a query.
    Until `stop` is set, as the staging sweep."""
    while not stop.is_set():
        await _until(stop, RECHECK_EVERY)
        if stop.is_set():
            return
        try:
            await run_in_threadpool(svc.access.reload_signing_keys)
        except Exception:  # a failing look must not end the loop; the old keys stay
            log.exception("cannot reload the URL-signing keys")


def _attest_published(svc: Services, stop: threading.Event) -> None:
    try:
        svc.attestations.ensure_key()
        made = svc.attestations.backfill(stop, once=True)
    except Exception:  # the server serves on; `gitreg reindex` retries
        log.exception("cannot sign the statements of versions published before them")
        return
    if made:
        log.info("signed the statements of %d versions published before them", made)


def all_routes(settings: Settings | None = None) -> list[BaseRoute]:
    # login.v1 is advertised only when sign-in is configured (gitreg/auth/http.py).
    services = {**discovery.SERVICES, **(login.login_service(settings) if settings else {})}
    return [
        *discovery.routes(services),
        # Before login's: Starlette tries routes in order, and each miss costs a
        # download answer time (docs/performance.md); the paths are disjoint.
        *modules.routes(),
        *oci.routes(),  # one Mount: the other routes pay one prefix test
        *attestations.routes(),
        *login.routes(),
        *providers.routes(),
        *mirror.routes(),
        *blobs.routes(),
        *health.routes(),
        *webhooks.routes(),
        *admin.routes(),
        *audit.routes(),
        *usage_api.routes(),  # before browse: `/usage` is no version
        *semver_api.routes(),
        *browse.routes(),  # last: its {version} paths must not shadow the ones above
        *ui.routes(),  # after every API route: the web UI shadows none (gitreg/ui/routes.py)
    ]


def create_app(settings: Settings, svc: Services | None = None) -> Starlette:
    """Build the ASGI app; resources live for the app's lifespan. Without a
    database to open yet, the app starts and waits for it (gitreg/api/startup.py)."""
    metrics.enable(settings.metrics_per_module)

    @contextlib.asynccontextmanager
    async def background(services: Services) -> AsyncIterator[None]:
        stop = asyncio.Event()
        watcher = asyncio.create_task(services.cache.watch(settings.refresh_interval, stop))
        cleaner = asyncio.create_task(_clean_staging_forever(services, stop))
        keys = asyncio.create_task(_reload_signing_keys_forever(services, stop))
        counts = asyncio.create_task(services.downloads.run(FLUSH_SECONDS))
        await _note_access_tables(services)
        # The attestation key is made now, and versions older than statements get theirs.
        backfill_stop = threading.Event()  # a thread's: set from the loop at shutdown
        statements = asyncio.create_task(
            run_in_threadpool(_attest_published, services, backfill_stop)
        )
        # Webhook jobs run on threads of this process (gitreg.jobs).
        runner = services.jobs.runner()
        if settings.job_workers > 0:
            runner.start()
        try:
            yield
        finally:
            # Background work that uses the index ends before the index closes,
            # whatever else fails on the way out.
            stop.set()
            backfill_stop.set()
            services.downloads.stop()
            try:
                await asyncio.gather(
                    cleaner, keys, watcher, counts, statements, return_exceptions=True
                )
                await run_in_threadpool(runner.stop)
                await services.mirror.aclose()
                await run_in_threadpool(services.downloads.flush)  # the last seconds' counts
            finally:
                if svc is None:
                    services.close()
                metrics.process_exiting()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if app.state.services is None:
            async with startup.opened_later(app, settings, background):
                yield
        else:
            async with background(app.state.services):
                yield

    app = Starlette(
        routes=[*all_routes(settings), *metrics_api.routes(settings)],
        lifespan=lifespan,
        # Outermost of ours: every answer, errors included, gets a request id.
        middleware=[
            Middleware(AccessLog, enabled=settings.access_log),
            # Inside the access log, so that a 408 it raises is logged as one.
            Middleware(
                BodyDeadline, timeout=settings.header_timeout, min_rate=settings.min_body_rate
            ),
        ],
        exception_handlers={
            GitregError: _gitreg_error,
            HTTPException: _http_error,
            # Raised by any read of the request body, on every route that reads one.
            ClientDisconnect: _client_gone,
            # Handled here rather than only by `Exception` (which Starlette
            # re-raises to the server after answering) so ENOSPC reaching a
            # route is answered cleanly and not logged as a crash.
            OSError: _unexpected,
            Exception: _unexpected,
        },
    )
    app.state.services = svc or startup.open_services(settings)
    return app


def app_from_environment() -> Starlette:
    """Factory for `uvicorn --factory gitreg.app:app_from_environment` (several workers)."""
    settings = load_settings()
    logs.configure(settings.log_format, settings.log_level)  # each worker is a new process
    limit_malloc_arenas()
    return create_app(settings)

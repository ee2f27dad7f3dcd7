"""`create_app(settings)`: the one place where gitreg's HTTP surface is assembled."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from gitreg.api import admin, blobs, discovery, health, mirror, modules, providers
from gitreg.api.responses import error_body, json_response
from gitreg.errors import GitregError, TooManyRequests, Unauthorized
from gitreg.jobs import JobRunner
from gitreg.services import Services, build_services
from gitreg.settings import Settings, load_settings
from gitreg.webhooks import routes as webhooks

log = logging.getLogger("gitreg.app")


async def _gitreg_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GitregError)
    if exc.status >= 500:
        log.error("%s %s: %s", request.method, request.url.path, exc)
    headers = {}
    if isinstance(exc, TooManyRequests):
        headers["Retry-After"] = str(exc.retry_after)
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = 'Bearer realm="gitreg"'
    return json_response(error_body(str(exc)), status=exc.status, headers=headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return json_response(
        error_body(exc.detail), status=exc.status_code, headers=dict(exc.headers or {})
    )


async def _unexpected(request: Request, exc: Exception) -> Response:
    # Never a traceback to the client; the log has it.
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return json_response(error_body("internal error"), status=500)


def all_routes() -> list[BaseRoute]:
    return [
        *discovery.routes(),
        *modules.routes(),
        *providers.routes(),
        *mirror.routes(),
        *blobs.routes(),
        *health.routes(),
        *webhooks.routes(),
        *admin.routes(),
    ]


def create_app(settings: Settings, svc: Services | None = None) -> Starlette:
    """Build the ASGI app; resources live for the app's lifespan."""
    services = svc or build_services(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        services.blobs.remove_stale_temp_files()
        watcher = asyncio.create_task(services.cache.watch(settings.refresh_interval))
        # Webhook jobs run on threads of this process (gitreg.jobs).
        runner = JobRunner.for_services(services)
        if settings.job_workers > 0:
            runner.start()
        try:
            yield
        finally:
            await run_in_threadpool(runner.stop)
            await services.mirror.upstream.aclose()
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            if svc is None:
                services.close()

    app = Starlette(
        routes=all_routes(),
        lifespan=lifespan,
        exception_handlers={
            GitregError: _gitreg_error,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
    )
    app.state.services = services
    return app


def app_from_environment() -> Starlette:
    """Factory for `uvicorn --factory gitreg.app:app_from_environment` (several workers)."""
    return create_app(load_settings())

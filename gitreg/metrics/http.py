"""`GET /metrics` on the main listener, for an admin token.

The numbers say how busy the registry is, which namespaces' traffic fails and
how the queue stands: operator information, so the same gate as /admin
(`gitreg token create --scope admin`): 401 without a token, 403 with a weaker
one; every failed attempt counts in `gitreg_auth_failures_total` and the
per-client failure limit (gitreg/auth/ratelimit.py). With `metrics_listen`
set the metrics are served only there (`gitreg serve`), and this route does
not exist, so /metrics here is 404 like any unknown path.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.api.credentials import credentials
from gitreg.api.services import services
from gitreg.auth.tokens import Scope
from gitreg.metrics import service as metrics
from gitreg.settings import Settings


async def metrics_page(request: Request) -> Response:
    await services(request).access.require(credentials(request), Scope.admin, None)
    # With several workers this reads every worker's files: off the event loop.
    body = await run_in_threadpool(generate_latest, metrics.registry())
    return Response(body, media_type=CONTENT_TYPE_LATEST, headers={"Cache-Control": "no-store"})


def routes(settings: Settings) -> list[Route]:
    if settings.metrics_listen:
        return []
    return [Route("/metrics", metrics_page, methods=["GET"])]

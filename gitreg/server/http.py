"""`/healthz` (the process answers; no dependencies) and `/readyz` (can serve
and publish: index writable, blob store writable, disk not full); docs/security.md.

`/readyz` answers 200 or 503 from `Health.readiness` (gitreg/storage/health.py),
within a second whatever its dependencies do. Repositories whose last sync
failed are named in a 200's body only: a problem of one repository's remote,
not of this replica (see there). A replica started while PostgreSQL is down
answers 503 until it is back (gitreg/api/startup.py).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.api.responses import json_response
from gitreg.api.services import services
from gitreg.api.startup import waiting_for
from gitreg.canonical_json import json_bytes


async def healthz(request: Request) -> Response:
    return json_response(b'{"status":"ok"}')


async def readyz(request: Request) -> Response:
    if (reason := waiting_for(request.app)) is not None:
        return json_response(json_bytes({"errors": [f"index not writable: {reason}"]}), status=503)
    report = await services(request).health.readiness()
    if report.problems:
        return json_response(json_bytes({"errors": report.problems}), status=503)
    if report.failing_repos:
        return json_response(json_bytes({"status": "ready", "failing_repos": report.failing_repos}))
    return json_response(b'{"status":"ready"}')


def routes() -> list[Route]:
    return [Route("/healthz", healthz), Route("/readyz", readyz)]

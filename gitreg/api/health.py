"""`/healthz` (the process answers; no dependencies) and `/readyz` (can serve
and publish: index writable, blob store writable, disk not full), checklist H3."""

from __future__ import annotations

import shutil
import tempfile

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.api.responses import json_response
from gitreg.canonical_json import json_bytes
from gitreg.services import Services, services

MIN_FREE_BYTES = 256 * 1024 * 1024


async def healthz(request: Request) -> Response:
    return json_response(b'{"status":"ok"}')


def _readiness(svc: Services) -> list[str]:
    problems: list[str] = []
    try:
        svc.index.check_writable()
    except Exception as exc:  # any failure means "not ready", with its reason
        problems.append(f"index not writable: {exc}")
    try:
        with tempfile.TemporaryFile(dir=svc.blobs.root / "tmp"):
            pass
    except OSError as exc:
        problems.append(f"blob store not writable: {exc.strerror}")
    free = shutil.disk_usage(svc.settings.data_dir).free
    if free < MIN_FREE_BYTES:
        problems.append(f"only {free // (1024 * 1024)} MiB free in the data dir")
    return problems


async def readyz(request: Request) -> Response:
    problems = await run_in_threadpool(_readiness, services(request))
    if problems:
        return json_response(json_bytes({"errors": problems}), status=503)
    return json_response(b'{"status":"ready"}')


def routes() -> list[Route]:
    return [Route("/healthz", healthz), Route("/readyz", readyz)]

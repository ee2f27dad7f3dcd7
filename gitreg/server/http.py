"""`/healthz` (the process answers; no dependencies) and `/readyz` (can serve
and publish: index writable, blob store writable, disk not full), checklist H3.

`/readyz` also names repositories whose last sync failed (issue 10), in its
body only: that is a problem of one repository's remote or mirror, not of this
replica, and every replica shares the data dir, so answering 503 would take
all of them out of rotation and stop serving every module already published.
The body gives ids and a status word, not URLs or error text, because
`/readyz` needs no token; `gitreg repo list` and `GET /admin/repos` say why.
"""

from __future__ import annotations

import shutil

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.api.responses import json_response
from gitreg.canonical_json import json_bytes
from gitreg.errors import DatabaseUnavailable, is_storage_full
from gitreg.modules.service import sync_status
from gitreg.services import Services, services

# A write of this size must succeed: an empty file can still be created on a
# filesystem with no free blocks left.
PROBE_BYTES = 16 * 1024


async def healthz(request: Request) -> Response:
    return json_response(b'{"status":"ok"}')


def _readiness(svc: Services) -> list[str]:
    problems: list[str] = []
    try:
        svc.index.check_writable()
    except DatabaseUnavailable:
        # Not the error text: it names the database host, and /readyz needs no token.
        problems.append("index not writable: the database is unavailable")
    except Exception as exc:  # any failure means "not ready", with its reason
        problems.append(f"index not writable: {exc}")
    return problems + _storage_problems(svc)


def _storage_problems(svc: Services) -> list[str]:
    """Reports "storage full: ..." when the data dir's filesystem has less than
    `min_free_bytes` free for unprivileged writers (what gitreg gets), or when a
    small real write to the blob store fails for lack of space; one probe write
    per call, whose other failures say the blob store is not writable."""
    problems: list[str] = []
    floor = svc.settings.min_free_bytes
    try:
        free = shutil.disk_usage(svc.settings.data_dir).free  # what unprivileged writers get
    except OSError as exc:
        problems.append(f"data dir not usable: {exc.strerror}")
    else:
        if free < floor:
            problems.append(
                f"storage full: only {free // 2**20} MiB free in the data dir, "
                f"below min_free_bytes ({floor} bytes)"
            )
    try:
        svc.blobs.check_writable(PROBE_BYTES)
    except OSError as exc:
        if is_storage_full(exc):
            problems.append(f"storage full: {exc.strerror} in the data dir")
        else:
            problems.append(f"blob store not writable: {exc.strerror}")
    return problems


def _failing_repos(svc: Services) -> list[dict[str, object]]:
    return [
        {"id": r.id, "status": sync_status(r), "last_fetch_at": r.last_fetch_at}
        for r in svc.index.repos()
        if r.last_fetch_error
    ]


async def readyz(request: Request) -> Response:
    svc = services(request)
    problems = await run_in_threadpool(_readiness, svc)
    if problems:
        return json_response(json_bytes({"errors": problems}), status=503)
    failing = await run_in_threadpool(_failing_repos, svc)
    if failing:  # still 200: see the module docstring
        return json_response(json_bytes({"status": "ready", "failing_repos": failing}))
    return json_response(b'{"status":"ready"}')


def routes() -> list[Route]:
    return [Route("/healthz", healthz), Route("/readyz", readyz)]

"""Operator JSON: the ingestion queue and publishing conflicts.

    GET  /admin/jobs?state=failed&limit=50   jobs, newest first, and counts by state
    GET  /admin/jobs/:id                     one job
    POST /admin/jobs/:id/retry               queue a failed job again
    GET  /admin/conflicts                    force-moved tags that were not published,
                                             and moved upstream tags of cached public modules
    GET  /admin/repos                        repositories and whether their last sync worked

Every call needs `Authorization: Bearer <token>` for a registry-wide token of
scope `admin` (`gitreg token create --scope admin`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.api.credentials import credentials
from gitreg.api.responses import json_response
from gitreg.api.services import services
from gitreg.auth.tokens import Scope
from gitreg.canonical_json import json_bytes
from gitreg.errors import BadRequest
from gitreg.modules.publisher import sync_status
from gitreg.numbers import plain_int
from gitreg.services import Services

MAX_LIMIT = 1000


def _int(value: str, what: str) -> int:
    number = plain_int(value)
    if number is None:
        raise BadRequest(f"{what} must be a positive integer")
    return number


async def _authorised(request: Request) -> Services:
    svc = services(request)
    await svc.access.require(credentials(request), Scope.admin, None)
    return svc


async def list_jobs(request: Request) -> Response:
    svc = await _authorised(request)
    state = request.query_params.get("state") or None
    limit = min(_int(request.query_params.get("limit", "100"), "limit"), MAX_LIMIT)
    found = await run_in_threadpool(svc.jobs.listing, state, limit)
    answer = {"counts": found.counts, "jobs": [j.to_json() for j in found.jobs]}
    return json_response(json_bytes(answer))


async def show_job(request: Request) -> Response:
    svc = await _authorised(request)
    job_id = _int(request.path_params["job_id"], "job id")
    found = await run_in_threadpool(svc.jobs.job, job_id)
    return json_response(json_bytes(found.to_json()))


async def retry_job(request: Request) -> Response:
    svc = await _authorised(request)
    job_id = _int(request.path_params["job_id"], "job id")
    outcome = await run_in_threadpool(svc.jobs.retry, job_id)
    if outcome.status == "duplicate":  # queued, running or done: nothing to retry
        answer = {"status": "unchanged", "job": outcome.job.to_json()}
        return json_response(json_bytes(answer), status=200)
    answer = {"status": outcome.status, "job": outcome.job.to_json()}
    return json_response(json_bytes(answer), status=202)


async def conflicts(request: Request) -> Response:
    svc = await _authorised(request)

    def build() -> dict[str, Any]:
        return {
            "conflicts": [
                {
                    "module": c.module,
                    "version": c.record.version,
                    "tag": c.record.tag,
                    "published_commit": c.record.published_commit,
                    "seen_commit": c.record.seen_commit,
                    "reason": c.record.reason,
                    "first_seen": c.record.first_seen,
                }
                for c in svc.modules.conflicts()
            ],
            # Upstream tags of cached public modules that moved:
            # the first bytes keep serving, as for own moved tags above.
            "module_proxy_moves": [dataclasses.asdict(m) for m in svc.module_proxy.moves()],
        }

    return json_response(json_bytes(await run_in_threadpool(build)))


async def repos(request: Request) -> Response:
    svc = await _authorised(request)

    def build() -> dict[str, Any]:
        return {
            "repos": [
                {
                    "id": r.id,
                    "url": r.url,
                    "forge_repo": r.forge_repo,
                    "status": sync_status(r),
                    "last_fetch_at": r.last_fetch_at,
                    "last_fetch_error": r.last_fetch_error,
                }
                for r in svc.repositories.repos()
            ]
        }

    return json_response(json_bytes(await run_in_threadpool(build)))


def routes() -> list[Route]:
    return [
        Route("/admin/jobs", list_jobs, methods=["GET"]),
        Route("/admin/jobs/{job_id}", show_job, methods=["GET"]),
        Route("/admin/jobs/{job_id}/retry", retry_job, methods=["POST"]),
        Route("/admin/conflicts", conflicts, methods=["GET"]),
        Route("/admin/repos", repos, methods=["GET"]),
    ]

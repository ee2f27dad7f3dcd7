"""Operator JSON: the audit log.

    GET /v1/admin/audit?since=24h&actor=A&action=token.*&object=O&limit=100&before=ID

Rows newest first, at most 1000 a page whatever `limit` asks; `next` is the
`before` of the next page (absent on the last one). Needs a registry-wide
`admin` token.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.api.credentials import credentials
from gitreg.api.responses import json_response
from gitreg.api.services import services
from gitreg.audit.service import MAX_PAGE
from gitreg.audit.store import AuditQuery
from gitreg.audit.times import parse_since
from gitreg.auth.tokens import Scope
from gitreg.canonical_json import json_bytes
from gitreg.errors import BadRequest
from gitreg.numbers import plain_int

PATH = "/v1/admin/audit"


def _number(text: str | None, what: str) -> int | None:
    if text is None:
        return None
    number = plain_int(text)
    if number is None or number < 1:
        raise BadRequest(f"{what} must be a positive integer")
    return number


async def listing(request: Request) -> Response:
    svc = services(request)
    await svc.access.require(credentials(request), Scope.admin, None)
    params = request.query_params
    since = params.get("since")
    query = AuditQuery(
        since=parse_since(since) if since else None,
        actor=params.get("actor") or None,
        action=params.get("action") or None,
        object=params.get("object") or None,
        before_id=_number(params.get("before"), "before"),
        # Above MAX_PAGE a page is MAX_PAGE rows, and `next` must still lead on.
        limit=min(_number(params.get("limit"), "limit") or 100, MAX_PAGE),
    )
    found = await run_in_threadpool(svc.audit.entries, query)
    answer: dict[str, object] = {"entries": [e.to_json() for e in found]}
    if found and len(found) == query.limit:
        answer["next"] = found[-1].id
    return json_response(json_bytes(answer), headers={"Cache-Control": "no-store"})


def routes() -> list[Route]:
    return [Route(PATH, listing, methods=["GET"])]

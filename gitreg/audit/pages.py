"""`/ui/admin/audit`: the audit log in the web UI, for administrators only
(signed in with admin on every namespace, or presenting a registry-wide admin
token); everyone else gets the same 404 page as for a page that does not
exist. The same filters as `gitreg audit`; rendered for each request and
never cached (`private, no-store`)."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from gitreg.api.services import services
from gitreg.audit.store import AuditQuery
from gitreg.audit.times import parse_since
from gitreg.auth.tokens import Scope
from gitreg.errors import BadRequest
from gitreg.numbers import plain_int
from gitreg.ui.pages import error_page, html_response, not_found_page, render
from gitreg.ui.viewer import Viewer, current_viewer

PATH = "/ui/admin/audit"
PAGE = 100
NO_STORE = {"Cache-Control": "private, no-store"}


def may_see_audit(viewer: Viewer) -> bool:
    return viewer.principal is not None and viewer.principal.allows(Scope.admin, None)


async def audit_page(request: Request) -> Response:
    viewer = await current_viewer(request)
    if not may_see_audit(viewer):
        return not_found_page(request, viewer)
    params = request.query_params
    since_text = params.get("since", "").strip()
    before = plain_int(params.get("before", "")) if params.get("before") else None
    try:
        query = AuditQuery(
            since=parse_since(since_text) if since_text else None,
            actor=params.get("actor") or None,
            action=params.get("action") or None,
            object=params.get("object") or None,
            before_id=before,
            limit=PAGE,
        )
    except BadRequest as exc:
        return error_page(request, viewer, 400, "Bad request", str(exc))
    found = await run_in_threadpool(services(request).audit.entries, query)
    next_url = ""
    if len(found) == PAGE:
        kept = {k: v for k, v in params.items() if k != "before" and v}
        next_url = f"{PATH}?{urlencode({**kept, 'before': found[-1].id})}"
    context = {
        "title": "Audit log",
        "entries": [e.to_json() for e in found],
        "query": {**query.__dict__, "since_text": since_text},
        "next_url": next_url,
    }
    return html_response(render(request, viewer, "audit.html", context), 200, NO_STORE)

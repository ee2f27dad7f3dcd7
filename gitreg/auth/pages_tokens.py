"""`/ui/tokens` and `/ui/admin/tokens` (docs/ui.md, "Tokens").

A signed-in person creates tokens for CI, lists and revokes their own. A new
token's scopes are chosen per namespace of the session's grants, each at
most the granted scope (gitreg.auth.tokens.Tokens.create_own). The secret is
in the answer to the POST only, sent with `Cache-Control: no-store`, and never
stored (only its sha256, as for every token). People whose grants include
admin on "*" see every token, grouped by person, and may revoke any. Every
POST passes gitreg/ui/csrf.py; a revoked token stops working at once in this
process and within `refresh_interval` on the others (gitreg/auth/service.py).
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from gitreg.api.services import services
from gitreg.auth.store import SessionRecord, TokenRecord
from gitreg.auth.tokens import EXPIRY_DAYS, Scope
from gitreg.errors import BadRequest, NotFound
from gitreg.numbers import plain_int
from gitreg.ui.csrf import checked_form
from gitreg.ui.pages import error_page, html_response, not_found_page, render
from gitreg.ui.viewer import Viewer, current_viewer

NO_STORE = {"Cache-Control": "no-store"}


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _scopes(token: TokenRecord) -> str:
    if token.grants is not None:
        return ", ".join(
            f"{s} on {'every namespace' if n == '*' else n}"
            for n, s in sorted(token.grants.items())
        )
    where = ", ".join(token.namespaces) if token.namespaces else "every namespace"
    return f"{token.scope} on {where}"


def _row(token: TokenRecord) -> dict[str, Any]:
    return {
        "id": token.id,
        "prefix": token.prefix,
        "name": token.description or "(no name)",
        "scopes": _scopes(token),
        "created": token.created_at[:16].replace("T", " "),
        "expires": _when(token.expires_at),
        "expired": token.expires_at is not None and token.expires_at <= time.time(),
    }


def _choices(session: SessionRecord) -> list[dict[str, Any]]:
    """Per granted namespace ("*" first), the scopes a new token may have there."""
    found = []
    for namespace, granted in sorted(session.grants.items(), key=lambda g: (g[0] != "*", g[0])):
        allowed = [s.name for s in Scope if s <= Scope.parse(granted)]
        label = "every namespace" if namespace == "*" else namespace
        found.append({"namespace": namespace, "label": label, "scopes": allowed})
    return found


async def _needs_session(request: Request, viewer: Viewer) -> Response:
    if not services(request).sign_in.configured:
        return not_found_page(request, viewer)
    return RedirectResponse(f"/ui/sign-in?next={request.url.path}", status_code=303)


async def _tokens_page(
    request: Request, viewer: Viewer, secret: str = "", message: str = "", status: int = 200
) -> Response:
    assert viewer.session is not None
    svc, subject = services(request), viewer.session.subject
    context = {
        "title": "Tokens",
        "csrf": viewer.session.csrf,
        "tokens": [_row(t) for t in await run_in_threadpool(svc.tokens.owned_by, subject)],
        "choices": _choices(viewer.session),
        "expiry_days": EXPIRY_DAYS,
        "secret": secret,
        "message": message,
    }
    return html_response(render(request, viewer, "tokens.html", context), status, NO_STORE)


async def tokens_page(request: Request) -> Response:
    viewer = await current_viewer(request)
    if viewer.session is None:
        return await _needs_session(request, viewer)
    return await _tokens_page(request, viewer)


def _scopes_chosen(form: dict[str, str]) -> dict[str, str]:
    """Per namespace, the scope the form's `scope:NAMESPACE` field chose ("none" too)."""
    return {k.removeprefix("scope:"): v for k, v in form.items() if k.startswith("scope:")}


async def create_token(request: Request) -> Response:
    checked = await checked_form(request)
    if isinstance(checked, Response):
        return checked
    viewer, form = checked
    session = viewer.session
    if session is None:
        return await _needs_session(request, viewer)
    days = plain_int(form.get("expires_days", ""))
    name, scopes = form.get("name", ""), _scopes_chosen(form)
    try:
        made = await run_in_threadpool(
            services(request).tokens.create_own, session, name, days, scopes
        )
    except BadRequest as exc:
        return await _tokens_page(request, viewer, message=str(exc), status=400)
    return await _tokens_page(request, viewer, secret=made.secret, status=201)


async def _revoke(revoke: Callable[[int], None], token_id: str) -> bool:
    """Whether `revoke` revoked the token the form's `token_id` names."""
    wanted = plain_int(token_id)
    if wanted is None:
        return False
    try:
        await run_in_threadpool(revoke, wanted)
    except NotFound:
        return False  # not theirs, or revoked meanwhile, here or on another replica
    return True


async def revoke_own(request: Request) -> Response:
    checked = await checked_form(request)
    if isinstance(checked, Response):
        return checked
    viewer, form = checked
    if viewer.session is None:
        return await _needs_session(request, viewer)
    own = functools.partial(services(request).tokens.revoke_owned, viewer.session.subject)
    if not await _revoke(own, form.get("id", "")):
        return not_found_page(request, viewer)
    return RedirectResponse("/ui/tokens", status_code=303)


async def _admin_only(request: Request, viewer: Viewer) -> Response | None:
    if viewer.session is None:
        return await _needs_session(request, viewer)
    if not viewer.is_admin:
        message = "Only people whose groups grant admin on every namespace may see this page."
        return error_page(request, viewer, 403, "Admins only", message)
    return None


async def admin_page(request: Request) -> Response:
    viewer = await current_viewer(request)
    refused = await _admin_only(request, viewer)
    if refused is not None or viewer.session is None:
        return refused or not_found_page(request, viewer)
    tokens = await run_in_threadpool(services(request).tokens.active)
    owners: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for token in tokens:
        owner = token.email or token.subject or "Operator tokens (gitreg token create)"
        owners[owner].append(_row(token))
    context = {"title": "All tokens", "csrf": viewer.session.csrf, "owners": sorted(owners.items())}
    return html_response(render(request, viewer, "admin_tokens.html", context), 200, NO_STORE)


async def admin_revoke(request: Request) -> Response:
    checked = await checked_form(request)
    if isinstance(checked, Response):
        return checked
    viewer, form = checked
    refused = await _admin_only(request, viewer)
    if refused is not None:
        return refused
    if not await _revoke(services(request).tokens.revoke, form.get("id", "")):
        return not_found_page(request, viewer)
    return RedirectResponse("/ui/admin/tokens", status_code=303)

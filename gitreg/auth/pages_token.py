"""`/ui/token`: let a browser present a read token, and `/ui/sign-out`.

GET shows the form; POST checks the token exactly as a Bearer token is
checked and keeps it in an HttpOnly, Secure, SameSite=Strict cookie, so no
script can read it and no other site's request carries it. This works with
or without sign-in configured (docs/ui.md): a read token is how a browser
without an identity-provider account, or a registry without one, sees
private namespaces. `/ui/sign-out` (POST) ends the session server-side and
forgets the token cookie. Both POSTs are checked by gitreg/ui/csrf.py.
Failed tokens count against the same per-client limit as failed Bearer
tokens (checklist U1).
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from gitreg.api.credentials import client_address
from gitreg.api.services import services
from gitreg.auth.tokens import token_hash
from gitreg.errors import TooManyRequests
from gitreg.metrics import service as metrics
from gitreg.ui.csrf import CSRF_COOKIE, checked_form, cookie_csrf
from gitreg.ui.pages import html_response, render
from gitreg.ui.viewer import SESSION_COOKIE, TOKEN_COOKIE, current_viewer

TOKEN_MAX_AGE = 30 * 86400  # the browser forgets it after 30 days; expiry still applies
COOKIE_FLAGS = {"httponly": True, "secure": True, "samesite": "strict", "path": "/"}
# The session's and the sign-in binding's (gitreg/auth/pages.py): Lax, as the
# issuer's redirect back is a top-level navigation from another site.
LAX_COOKIE_FLAGS = {**COOKIE_FLAGS, "samesite": "lax"}


async def _form_page(request: Request, message: str = "", status: int = 200) -> Response:
    viewer = await current_viewer(request)
    double_submit = cookie_csrf(request)
    csrf = viewer.session.csrf if viewer.session is not None else double_submit
    context = {"title": "Read token", "csrf": csrf, "message": message}
    response = html_response(render(request, viewer, "token.html", context), status)
    response.set_cookie(CSRF_COOKIE, double_submit, max_age=None, **COOKIE_FLAGS)  # type: ignore[arg-type]
    return response


async def token_form(request: Request) -> Response:
    return await _form_page(request)


async def token_submit(request: Request) -> Response:
    checked = await checked_form(request)
    if isinstance(checked, Response):
        return checked
    _, form = checked
    svc = services(request)
    client = client_address(request)
    try:
        svc.access.limiter.check(client)
    except TooManyRequests as exc:
        return await _form_page(request, str(exc), 429)
    token = form.get("token", "").strip()
    if (await svc.access.snapshot()).holder(token) is None:
        svc.access.limiter.failed(client)
        metrics.auth_failed("token")
        message = "That token is not valid: it is unknown, revoked or expired."
        return await _form_page(request, message, 400)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(TOKEN_COOKIE, token, max_age=TOKEN_MAX_AGE, **COOKIE_FLAGS)  # type: ignore[arg-type]
    return response


async def sign_out(request: Request) -> Response:
    """Ends the session in the index (so on every replica) and forgets both cookies."""
    checked = await checked_form(request)
    if isinstance(checked, Response):
        return checked
    session_id = request.cookies.get(SESSION_COOKIE, "")
    if session_id:
        await run_in_threadpool(services(request).auth.delete_session, token_hash(session_id))
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(TOKEN_COOKIE, **COOKIE_FLAGS)  # type: ignore[arg-type]
    response.delete_cookie(SESSION_COOKIE, **LAX_COOKIE_FLAGS)  # type: ignore[arg-type]
    return response

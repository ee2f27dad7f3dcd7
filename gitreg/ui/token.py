"""`/ui/token`: let a browser present a read token (until sign-in, issue 14).

GET shows the form; POST checks the token exactly as a Bearer token is
checked and keeps it in an HttpOnly, Secure, SameSite=Strict cookie, so no
script can read it and no other site's request carries it. `/ui/sign-out`
(POST) removes it. Both POSTs need the CSRF token of the form (double
submit: a random value both in a SameSite=Strict cookie and in the form,
compared in constant time), and browsers that send `Sec-Fetch-Site` must say
the request came from this site. Failed tokens count against the same
per-client limit as failed Bearer tokens (checklist U1).
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from gitreg import metrics
from gitreg.errors import TooManyRequests
from gitreg.services import services
from gitreg.ui.pages import error_page, html_response, render
from gitreg.ui.viewer import TOKEN_COOKIE, current_viewer, principal_for

CSRF_COOKIE = "gitreg_ui_csrf"
MAX_FORM_BYTES = 4096
TOKEN_MAX_AGE = 30 * 86400  # the browser forgets it after 30 days; expiry still applies
_COOKIE_FLAGS = {"httponly": True, "secure": True, "samesite": "strict", "path": "/"}


def _csrf(request: Request) -> str:
    current = request.cookies.get(CSRF_COOKIE, "")
    return current if 20 <= len(current) <= 100 else secrets.token_urlsafe(32)


async def _form_page(request: Request, message: str = "", status: int = 200) -> Response:
    viewer = await current_viewer(request)
    csrf = _csrf(request)
    context = {"title": "Read token", "csrf": csrf, "message": message}
    response = html_response(render(request, viewer, "token.html", context), status)
    response.set_cookie(CSRF_COOKIE, csrf, max_age=None, **_COOKIE_FLAGS)  # type: ignore[arg-type]
    return response


async def token_form(request: Request) -> Response:
    return await _form_page(request)


async def _form(request: Request) -> dict[str, str] | None:
    """The urlencoded form, or None when it is too large or not one."""
    if request.headers.get("content-type", "").split(";")[0].strip() != (
        "application/x-www-form-urlencoded"
    ):
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    parsed = parse_qs(body.decode("utf-8", "replace"), max_num_fields=10)
    return {k: v[0] for k, v in parsed.items()}


async def _checked_form(request: Request) -> dict[str, str] | Response:
    site = request.headers.get("sec-fetch-site")
    form = await _form(request)
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = (form or {}).get("csrf", "")
    same_site = site is None or site in ("same-origin", "none")
    if form is None or not cookie or not same_site or not hmac.compare_digest(cookie, sent):
        viewer = await current_viewer(request)
        return error_page(
            request, viewer, 403, "Form expired", "Reload the form and send it again."
        )
    return form


async def token_submit(request: Request) -> Response:
    form = await _checked_form(request)
    if isinstance(form, Response):
        return form
    svc = services(request)
    client = request.client.host if request.client else "unknown"
    try:
        svc.access.limiter.check(client)
    except TooManyRequests as exc:
        return await _form_page(request, str(exc), 429)
    token = form.get("token", "").strip()
    if principal_for(await svc.access.snapshot(), token) is None:
        svc.access.limiter.failed(client)
        metrics.auth_failed("token")
        message = "That token is not valid: it is unknown, revoked or expired."
        return await _form_page(request, message, 400)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(TOKEN_COOKIE, token, max_age=TOKEN_MAX_AGE, **_COOKIE_FLAGS)  # type: ignore[arg-type]
    return response


async def sign_out(request: Request) -> Response:
    form = await _checked_form(request)
    if isinstance(form, Response):
        return form
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(TOKEN_COOKIE, **_COOKIE_FLAGS)  # type: ignore[arg-type]
    return response

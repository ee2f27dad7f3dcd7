"""Who a browser is: `/ui/sign-in` through the identity provider (the flow is
gitreg/auth/web_sign_in.py, the settings docs/sign-in.md), `/ui/token` for a
read token, and `/ui/sign-out`.

GET `/ui/sign-in` only shows a "Sign in with <issuer>" button and writes
nothing: the link is on every page, and crawlers follow links. The button's
POST, checked like every other form of the UI (gitreg/ui/csrf.py: this site's
Origin / Sec-Fetch-Site and the double-submit cookie, there being no session
yet), is what keeps a pending sign-in in the index, within the limits of
gitreg.auth.pending.SignInLimits, sets the sign-in's binding cookie and sends
the browser to the issuer. GET `/ui/sign-in/callback` is where the issuer
sends it back:
the session cookie is set there, under a new id, and any session the browser
came with is deleted (rotation at sign-in). Both cookies are HttpOnly, Secure
and SameSite=Lax: Lax, not Strict, because the callback is a top-level
navigation coming from the issuer's site, which Strict cookies do not follow.
Without `oidc_issuer` both paths are the 404 page.

GET `/ui/token` shows a form; its POST checks the token exactly as a Bearer
token is checked and keeps it in an HttpOnly, Secure, SameSite=Strict cookie,
so no script can read it and no other site's request carries it. This works
with or without sign-in configured (docs/ui.md): a read token is how a browser
without an identity-provider account, or a registry without one, sees private
namespaces. Failed tokens count against the same per-client limit as failed
Bearer tokens (docs/security.md). `/ui/sign-out` (POST) ends the session
server-side and forgets the token cookie. Every POST is checked by
gitreg/ui/csrf.py.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from gitreg.api.credentials import client_address
from gitreg.api.services import services
from gitreg.api.urls import base_url
from gitreg.auth.oidc import new_secret
from gitreg.auth.pending import SignInsBusy
from gitreg.auth.web_sign_in import SignInFailed, safe_next
from gitreg.errors import TooManyRequests, Unauthorized, UpstreamError
from gitreg.ui.csrf import CSRF_COOKIE, checked_form, cookie_csrf
from gitreg.ui.pages import CSP, error_page, html_response, not_found_page, render
from gitreg.ui.viewer import SESSION_COOKIE, TOKEN_COOKIE, current_viewer

CALLBACK = "/ui/sign-in/callback"
BINDING_COOKIE = "__Host-gitreg_sign_in"
BINDING_MAX_AGE = 600  # as long as the pending sign-in lives
TOKEN_MAX_AGE = 30 * 86400  # the browser forgets it after 30 days; expiry still applies
NO_STORE = {"Cache-Control": "no-store"}
COOKIE_FLAGS = {"httponly": True, "secure": True, "samesite": "strict", "path": "/"}
# The session's and the sign-in binding's: Lax, as the issuer's redirect back
# is a top-level navigation from another site.
LAX_COOKIE_FLAGS = {**COOKIE_FLAGS, "samesite": "lax"}


async def _unavailable(request: Request) -> Response:
    response = error_page(
        request,
        await current_viewer(request),
        503,
        "Sign-in unavailable",
        "The identity provider cannot be reached. Try again in a minute.",
    )
    response.headers["Retry-After"] = "30"
    return response


async def sign_in_page(request: Request) -> Response:
    """The button that starts a sign-in; nothing is written to the index."""
    viewer = await current_viewer(request)
    svc = services(request)
    if not svc.sign_in.configured:
        return not_found_page(request, viewer)
    try:
        target = await svc.sign_in.form_target()
    except UpstreamError:
        return await _unavailable(request)
    double_submit = cookie_csrf(request)
    issuer = svc.settings.oidc_issuer
    context = {
        "title": "Sign in",
        "csrf": viewer.session.csrf if viewer.session is not None else double_submit,
        "next": safe_next(request.query_params.get("next", "/")),
        "provider": urlsplit(issuer).hostname or issuer,
    }
    csp = CSP.replace("form-action 'self'", f"form-action 'self' {target}")
    headers = {**NO_STORE, "Content-Security-Policy": csp}
    response = html_response(render(request, viewer, "sign_in.html", context), headers=headers)
    response.set_cookie(CSRF_COOKIE, double_submit, max_age=None, **COOKIE_FLAGS)  # type: ignore[arg-type]
    return response


async def sign_in(request: Request) -> Response:
    """The button's POST: a pending sign-in, then the issuer."""
    svc = services(request)
    if not svc.sign_in.configured:
        return not_found_page(request, await current_viewer(request))
    checked = await checked_form(request)
    if isinstance(checked, Response):
        return checked
    viewer, form = checked
    binding = new_secret()
    callback = base_url(request, svc.settings) + CALLBACK
    client = client_address(request)
    try:
        url = await svc.sign_in.begin(callback, binding, form.get("next", "/"), client)
    except UpstreamError:
        return await _unavailable(request)
    except SignInsBusy as exc:
        page = error_page(request, viewer, exc.status, "Sign-in busy", f"{exc}.")
        page.headers["Retry-After"] = str(exc.retry_after)
        return page
    response = RedirectResponse(url, status_code=303, headers=NO_STORE)
    response.set_cookie(BINDING_COOKIE, binding, max_age=BINDING_MAX_AGE, **LAX_COOKIE_FLAGS)  # type: ignore[arg-type]
    return response


async def callback(request: Request) -> Response:
    svc = services(request)
    if not svc.sign_in.configured:
        return not_found_page(request, await current_viewer(request))
    binding = request.cookies.get(BINDING_COOKIE, "")
    previous = request.cookies.get(SESSION_COOKIE, "")
    try:
        done = await svc.sign_in.finish(
            dict(request.query_params), binding, previous, client_address(request)
        )
    except SignInFailed as exc:
        viewer = await current_viewer(request)
        page = error_page(request, viewer, 403, "Sign-in failed", f"{exc} Sign in again.")
        page.delete_cookie(BINDING_COOKIE, **LAX_COOKIE_FLAGS)  # type: ignore[arg-type]
        return page
    except UpstreamError:
        return await _unavailable(request)
    response = RedirectResponse(done.next_path, status_code=303, headers=NO_STORE)
    max_age = int(svc.settings.session_ttl)
    response.set_cookie(SESSION_COOKIE, done.session_id, max_age=max_age, **LAX_COOKIE_FLAGS)  # type: ignore[arg-type]
    response.delete_cookie(BINDING_COOKIE, **LAX_COOKIE_FLAGS)  # type: ignore[arg-type]
    return response


async def _token_form(request: Request, message: str = "", status: int = 200) -> Response:
    viewer = await current_viewer(request)
    double_submit = cookie_csrf(request)
    csrf = viewer.session.csrf if viewer.session is not None else double_submit
    context = {"title": "Read token", "csrf": csrf, "message": message}
    response = html_response(render(request, viewer, "token.html", context), status)
    response.set_cookie(CSRF_COOKIE, double_submit, max_age=None, **COOKIE_FLAGS)  # type: ignore[arg-type]
    return response


async def token_form(request: Request) -> Response:
    return await _token_form(request)


async def token_submit(request: Request) -> Response:
    checked = await checked_form(request)
    if isinstance(checked, Response):
        return checked
    _, form = checked
    token = form.get("token", "").strip()
    try:
        await services(request).access.check_token(token, client_address(request))
    except TooManyRequests as exc:
        return await _token_form(request, str(exc), 429)
    except Unauthorized:
        message = "That token is not valid: it is unknown, revoked or expired."
        return await _token_form(request, message, 400)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(TOKEN_COOKIE, token, max_age=TOKEN_MAX_AGE, **COOKIE_FLAGS)  # type: ignore[arg-type]
    return response


async def sign_out_page(request: Request) -> Response:
    """The header's "Sign out": a page with the button, as pages are cached
    per person, not per session, and the form carries the session's token."""
    viewer = await current_viewer(request)
    if viewer.session is None:
        return RedirectResponse("/", status_code=303)
    context = {"title": "Sign out", "csrf": viewer.session.csrf}
    return html_response(render(request, viewer, "sign_out.html", context), headers=NO_STORE)


async def sign_out(request: Request) -> Response:
    """Ends the session in the index (so on every replica) and forgets both cookies."""
    checked = await checked_form(request)
    if isinstance(checked, Response):
        return checked
    await services(request).sign_in.sign_out(request.cookies.get(SESSION_COOKIE, ""))
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(TOKEN_COOKIE, **COOKIE_FLAGS)  # type: ignore[arg-type]
    response.delete_cookie(SESSION_COOKIE, **LAX_COOKIE_FLAGS)  # type: ignore[arg-type]
    return response

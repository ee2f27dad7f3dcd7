"""`/ui/sign-in`: the web UI's sign-in through the identity provider (issue 14;
the flow is gitreg/auth/web_sign_in.py, the settings docs/sign-in.md).

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
Without `oidc_issuer` both paths are the 404 page. Sign-out is
`POST /ui/sign-out` (gitreg/auth/pages_token.py).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from gitreg.api.credentials import client_address
from gitreg.api.services import services
from gitreg.api.urls import base_url
from gitreg.auth.http import oidc_client, sign_in_limits
from gitreg.auth.oidc import new_secret
from gitreg.auth.pages_token import COOKIE_FLAGS, LAX_COOKIE_FLAGS
from gitreg.auth.pending import SignInsBusy
from gitreg.auth.tokens import token_hash
from gitreg.auth.web_sign_in import SignInFailed, WebSignIn, safe_next
from gitreg.errors import UpstreamError
from gitreg.ui.csrf import CSRF_COOKIE, checked_form, cookie_csrf
from gitreg.ui.pages import CSP, error_page, html_response, not_found_page, render
from gitreg.ui.viewer import SESSION_COOKIE, current_viewer

CALLBACK = "/ui/sign-in/callback"
BINDING_COOKIE = "__Host-gitreg_sign_in"
BINDING_MAX_AGE = 600  # as long as the pending sign-in lives
NO_STORE = {"Cache-Control": "no-store"}


def _flow(request: Request) -> WebSignIn | None:
    """One flow per app, built on first use; None without sign-in configured."""
    svc = services(request)
    if not svc.settings.oidc_issuer:
        return None
    flow = getattr(request.app.state, "web_sign_in", None)
    if flow is None:
        flow = WebSignIn(svc.settings, svc.auth, oidc_client(request), sign_in_limits(request))
        request.app.state.web_sign_in = flow
    assert isinstance(flow, WebSignIn)
    return flow


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
    flow = _flow(request)
    if flow is None:
        return not_found_page(request, viewer)
    settings = services(request).settings
    try:
        target = await flow.form_target()
    except UpstreamError:
        return await _unavailable(request)
    double_submit = cookie_csrf(request)
    context = {
        "title": "Sign in",
        "csrf": viewer.session.csrf if viewer.session is not None else double_submit,
        "next": safe_next(request.query_params.get("next", "/")),
        "provider": urlsplit(settings.oidc_issuer).hostname or settings.oidc_issuer,
    }
    csp = CSP.replace("form-action 'self'", f"form-action 'self' {target}")
    headers = {**NO_STORE, "Content-Security-Policy": csp}
    response = html_response(render(request, viewer, "sign_in.html", context), headers=headers)
    response.set_cookie(CSRF_COOKIE, double_submit, max_age=None, **COOKIE_FLAGS)  # type: ignore[arg-type]
    return response


async def sign_in(request: Request) -> Response:
    """The button's POST: a pending sign-in, then the issuer."""
    flow = _flow(request)
    if flow is None:
        return not_found_page(request, await current_viewer(request))
    checked = await checked_form(request)
    if isinstance(checked, Response):
        return checked
    viewer, form = checked
    binding = new_secret()
    callback = base_url(request, services(request).settings) + CALLBACK
    client = client_address(request)
    try:
        url = await flow.begin(callback, binding, form.get("next", "/"), client)
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
    flow = _flow(request)
    if flow is None:
        return not_found_page(request, await current_viewer(request))
    binding = request.cookies.get(BINDING_COOKIE, "")
    try:
        done = await flow.finish(dict(request.query_params), binding)
    except SignInFailed as exc:
        viewer = await current_viewer(request)
        page = error_page(request, viewer, 403, "Sign-in failed", f"{exc} Sign in again.")
        page.delete_cookie(BINDING_COOKIE, **LAX_COOKIE_FLAGS)  # type: ignore[arg-type]
        return page
    except UpstreamError:
        return await _unavailable(request)
    old = request.cookies.get(SESSION_COOKIE, "")
    if old:  # rotation: whatever the browser held before is no session now
        await run_in_threadpool(services(request).auth.delete_session, token_hash(old))
    response = RedirectResponse(done.next_path, status_code=303, headers=NO_STORE)
    max_age = int(services(request).settings.session_ttl)
    response.set_cookie(SESSION_COOKIE, done.session_id, max_age=max_age, **LAX_COOKIE_FLAGS)  # type: ignore[arg-type]
    response.delete_cookie(BINDING_COOKIE, **LAX_COOKIE_FLAGS)  # type: ignore[arg-type]
    return response

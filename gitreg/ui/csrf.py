"""CSRF protection of every form that changes state (docs/ui.md).

Two checks, both required:

- The request must come from this site. Browsers that send `Sec-Fetch-Site`
  must say `same-origin` (or `none`, a request the person typed); an `Origin`
  header, when sent, must be this registry's own origin. A form posted by
  another site fails here even before the token is looked at.
- The form's `csrf` field must equal the expected token, compared in constant
  time. With a session it is the session's synchronizer token, drawn at
  sign-in and stored with the session (OWASP CSRF cheat sheet, "Synchronizer
  token pattern"); without one (the read-token form) it is the double-submit
  value of the `gitreg_ui_csrf` cookie, which is SameSite=Strict and HttpOnly.

Anything else is answered 403 "Form expired", and nothing changes.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import Response

from gitreg.api.services import services
from gitreg.api.urls import base_url
from gitreg.ui.pages import error_page
from gitreg.ui.viewer import Viewer, current_viewer

CSRF_COOKIE = "gitreg_ui_csrf"
# The token form posts one scope per granted namespace: room for hundreds.
MAX_FORM_BYTES = 16 * 1024
MAX_FORM_FIELDS = 1000


def cookie_csrf(request: Request) -> str:
    """The double-submit value: the cookie's when it looks like ours, else new."""
    current = request.cookies.get(CSRF_COOKIE, "")
    return current if 20 <= len(current) <= 100 else secrets.token_urlsafe(32)


async def read_form(request: Request) -> dict[str, str] | None:
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
    try:
        parsed = parse_qs(body.decode("utf-8", "replace"), max_num_fields=MAX_FORM_FIELDS)
    except ValueError:  # more fields than any of our forms has
        return None
    return {k: v[0] for k, v in parsed.items()}


def from_this_site(request: Request) -> bool:
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True  # older browsers omit it on same-origin posts
    return _origin(origin) == _origin(base_url(request, services(request).settings))


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    try:
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:  # "null" or a broken header: matches nothing of ours
        return ("", "", None)
    return (parts.scheme, (parts.hostname or "").lower(), port)


def _token_ok(request: Request, viewer: Viewer, sent: str) -> bool:
    if viewer.session is not None:
        expected = viewer.session.csrf
    else:
        expected = request.cookies.get(CSRF_COOKIE, "")
    return bool(expected) and hmac.compare_digest(expected.encode(), sent.encode())


async def checked_form(request: Request) -> tuple[Viewer, dict[str, str]] | Response:
    """The viewer and the form of a POST that passed both checks, or the 403 page."""
    viewer = await current_viewer(request)
    form = await read_form(request)
    if (
        form is None
        or not from_this_site(request)
        or not _token_ok(request, viewer, form.get("csrf", ""))
    ):
        return error_page(
            request, viewer, 403, "Form expired", "Reload the form and send it again."
        )
    return viewer, form

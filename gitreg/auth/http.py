"""HTTP for `terraform login` (login.v1; the flow is gitreg/auth/login.py).

`/oauth/authorization` and `/oauth/callback` are visited by the browser and
answer redirects: to the identity provider, then to Terraform's loopback
listener. An error that cannot go back to a trusted redirect_uri is a JSON
`{"errors": [...]}` 400, never a redirect to an untrusted address; a person
refused a token gets a page saying why (gitreg.auth.login.Refusal).
`/oauth/token` is called by Terraform and answers RFC 6749 5.1/5.2 JSON.
Without `oidc_issuer` all three are 404, and discovery does not list login.v1,
except for RFC 8693 token exchange at `/oauth/token`, which CI workloads use
whenever `[[workload_identity]]` is configured (gitreg/workload_identity).
`/oauth/authorization` writes a pending sign-in for an anonymous visitor, so it
is bounded per client address and in all (gitreg.auth.pending.SignInLimits,
docs/sign-in.md "Limits"): over either, a JSON 503 with Retry-After.
"""

from __future__ import annotations

import base64
import html
import logging
from urllib.parse import parse_qsl, unquote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from gitreg.api.credentials import client_address
from gitreg.api.responses import error_body, json_response
from gitreg.api.services import services
from gitreg.api.urls import base_url
from gitreg.auth.login import CLIENT_ID, PORTS, OAuthError, Redirect, Refusal
from gitreg.auth.pending import SignInsBusy
from gitreg.canonical_json import json_bytes
from gitreg.errors import IssuerUnavailable, PayloadTooLarge
from gitreg.settings import Settings
from gitreg.workload_identity.service import TOKEN_EXCHANGE
from gitreg.workload_identity.verify import MAX_TOKEN_BYTES

log = logging.getLogger("gitreg.auth.http")

AUTHZ = "/oauth/authorization"
TOKEN = "/oauth/token"  # noqa: S105 - a path, not a secret
CALLBACK = "/oauth/callback"
MAX_FORM_BYTES = MAX_TOKEN_BYTES + 4 * 1024  # a subject_token of the longest size taken
# RFC 6749 5.1: token answers must not be cached.
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def login_service(settings: Settings) -> dict[str, object]:
    """The login.v1 entry of service discovery, when an issuer is configured."""
    if not settings.oidc_issuer:
        return {}
    return {
        "login.v1": {
            "client": CLIENT_ID,
            "grant_types": ["authz_code"],
            "authz": AUTHZ,
            "token": TOKEN,
            "ports": list(PORTS),
        }
    }


def _redirect(url: str) -> Response:
    return RedirectResponse(url, status_code=302, headers=NO_STORE)


def _single(request: Request) -> dict[str, str]:
    # A repeated parameter is refused by taking none of it: RFC 6749 3.1 says
    # parameters must not be included more than once.
    pairs = request.query_params.multi_items()
    names = [name for name, _ in pairs]
    return {name: value for name, value in pairs if names.count(name) == 1}


async def authorization(request: Request) -> Response:
    svc = services(request)
    callback = base_url(request, svc.settings) + CALLBACK
    client = client_address(request)
    try:
        return _redirect((await svc.login.begin(_single(request), callback, client)).url)
    except SignInsBusy as exc:
        # The JSON errors of this route, answered here rather than by the app's
        # handler, which logs every 5xx: a flood would become a log flood.
        headers = {**NO_STORE, "Retry-After": str(exc.retry_after)}
        return json_response(error_body(str(exc)), status=exc.status, headers=headers)


async def callback(request: Request) -> Response:
    answer = await services(request).login.finish(_single(request))
    if isinstance(answer, Redirect):
        return _redirect(answer.url)
    return _refusal_page(answer)


def _refusal_page(refusal: Refusal) -> Response:
    # A page for a person, not JSON: they are looking at a browser tab.
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>Sign-in refused</title></head><body><h1>Sign-in refused</h1>"
        f"<p>{html.escape(refusal.description)}</p>"
        "<p>Stop <code>terraform login</code> with Ctrl-C; it cannot tell on its own."
        f' <a href="{html.escape(refusal.back_url)}">Return to Terraform</a></p></body></html>'
    )
    unavailable = refusal.error == "temporarily_unavailable"
    headers = {**NO_STORE, **({"Retry-After": "30"} if unavailable else {})}
    return HTMLResponse(page, status_code=503 if unavailable else 403, headers=headers)


async def token(request: Request) -> Response:
    svc = services(request)
    login = svc.login
    client = client_address(request)
    # 404 without sign-in and without workload identity; a client over its
    # failed-authentication limit: 429. Both before the body is read.
    if not svc.workload_identity.configured:
        login.check_client(client)
    svc.access.limiter.check(client)
    try:
        form = _form(await _form_body(request))
        grant = form.get("grant_type", "")
        if not grant:
            raise OAuthError("invalid_request", "grant_type is required")
        if grant == TOKEN_EXCHANGE:
            # RFC 8693: a CI workload's ID token for a gitreg token (docs/ci.md).
            answer = await svc.workload_identity.exchange(form, client)
            return json_response(json_bytes(answer), headers=NO_STORE)
        if not svc.settings.oidc_issuer:
            raise OAuthError(
                "unsupported_grant_type",
                f"grant_type must be {TOKEN_EXCHANGE}: sign-in is not configured on this registry",
            )
        login.check_client(client)
        form.setdefault("client_id", _basic_client_id(request))
        answer = await login.token(form, client)
    except OAuthError as exc:
        status = 401 if exc.error == "invalid_client" else 400
        return _oauth_error(exc.error, exc.description, status)
    except PayloadTooLarge as exc:
        return _oauth_error("invalid_request", str(exc), exc.status)
    except IssuerUnavailable as exc:  # logged once per outage by the issuer's keys
        refused = _oauth_error("temporarily_unavailable", str(exc), exc.status)
        refused.headers["Retry-After"] = str(exc.retry_after)
        return refused
    return json_response(json_bytes(answer), headers=NO_STORE)


def _oauth_error(error: str, description: str, status: int) -> Response:
    body = {"error": error, "error_description": description}
    return json_response(json_bytes(body), status=status, headers=NO_STORE)


def _form(body: bytes) -> dict[str, str]:
    """The fields of a token request; RFC 6749 3.2 forbids sending one twice,
    and taking either copy could let a proxy and gitreg read different requests."""
    form: dict[str, str] = {}
    for name, value in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
        if name in form:
            raise OAuthError("invalid_request", f"{name[:40]} is sent more than once")
        form[name] = value
    return form


async def _form_body(request: Request) -> bytes:
    if request.headers.get("content-type", "").split(";")[0].strip() != (
        "application/x-www-form-urlencoded"
    ):
        raise OAuthError("invalid_request", "the body must be application/x-www-form-urlencoded")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise PayloadTooLarge("token request body too large")
    return bytes(body)


def _basic_client_id(request: Request) -> str:
    """Go's x/oauth2 (Terraform's client) may send the client id as HTTP Basic
    credentials with an empty secret instead of in the form (RFC 6749 2.3.1)."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return ""
    try:
        user = base64.b64decode(value.strip(), validate=True).decode().partition(":")[0]
    except (ValueError, UnicodeDecodeError):
        return ""
    return unquote(user)


def routes() -> list[Route]:
    return [
        Route(AUTHZ, authorization, methods=["GET"]),
        Route(CALLBACK, callback, methods=["GET"]),
        Route(TOKEN, token, methods=["POST"]),
    ]

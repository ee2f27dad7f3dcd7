"""OCI Distribution Specification v1.1, read side, under `/v2/` (docs/oci.md).

    GET|HEAD /v2/                                  API version check
    GET|POST /v2/token                             pull tokens (Docker token flow)
    GET      /v2/<name>/tags/list?n=&last=
    GET|HEAD /v2/<name>/manifests/<tag|digest>
    GET|HEAD /v2/<name>/blobs/<digest>
    GET      /v2/<name>/referrers/<digest>?artifactType=

Everything else under `/v2/` that would write (a push, a delete) answers 405
with an `UNSUPPORTED` error: releases come from git. Errors are the spec's
`{"errors": [{"code", "message", "detail"}]}`; a 401 carries the
`WWW-Authenticate: Bearer realm=...,service=...,scope=...` challenge that
sends a client to `/v2/token`, with `error="insufficient_scope"` for a pull
token that does not cover the repository. A 503 (storage away, a layer the
blob store lost) is `UNAVAILABLE`, Docker's registry code for it, with
`Retry-After`. The token endpoint's OAuth2 `POST` refuses as RFC 6749 5.2 does.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, quote, urlsplit

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from gitreg.api.blobs import stored_blob
from gitreg.api.credentials import credentials
from gitreg.api.services import services
from gitreg.api.urls import base_url
from gitreg.auth.service import AUTH_REQUIRED
from gitreg.errors import (
    BadRequest,
    BlobMissing,
    Forbidden,
    GitregError,
    NotFound,
    PayloadTooLarge,
    TooManyRequests,
    Unauthorized,
    UnknownReference,
    log_level,
    operator_text,
)
from gitreg.oci.grants import InsufficientScope
from gitreg.oci.manifests import Document, tags_document
from gitreg.oci.names import NameInvalid

API_VERSION = {"Docker-Distribution-API-Version": "registry/2.0"}
READ = ("GET", "HEAD")
IMMUTABLE = "public, max-age=31536000, immutable"
PRIVATE = "private, no-store"
MAX_FORM = 16 * 1024
OCI_AUTH_REQUIRED = (
    "authentication required: this namespace is private; log in to this registry with a"
    " gitreg read token as the password (docs/oci.md)"
)

# What the OAuth2 form of the token endpoint takes (the distribution spec's
# "Oauth2 Token Authentication"): a gitreg token as the password or as the
# refresh token. `authorization_code` is reserved there and not served here.
GRANT_TYPES = ("password", "refresh_token")

Handler = Callable[[Request], Awaitable[Response]]

log = logging.getLogger("gitreg.oci")


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps({"errors": [{"code": code, "message": message, "detail": None}]})
    return Response(
        body.encode(),
        status_code=status,
        media_type="application/json",
        headers={**API_VERSION, **(headers or {})},
    )


def _challenge(request: Request, error: str = "") -> dict[str, str]:
    base = base_url(request, services(request).settings)
    service = urlsplit(base).netloc
    value = f'Bearer realm="{base}/v2/token",service="{service}"'
    name = request.path_params.get("name")
    if name:
        value += f',scope="repository:{name}:pull"'
    if error:
        value += f',error="{error}"'
    return {"WWW-Authenticate": value}


def _oci(
    unknown: str = "NAME_UNKNOWN", invalid: str = "NAME_INVALID"
) -> Callable[[Handler], Handler]:
    """Read-only, and gitreg's errors in the spec's words: `unknown` is the
    code of an UnknownReference on this route, `invalid` of a BadRequest."""

    def wrap(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            if request.method not in READ:
                return _error(
                    405,
                    "UNSUPPORTED",
                    "this registry is read-only: releases are published from git (docs/oci.md)",
                    {"Allow": "GET, HEAD"},
                )
            try:
                return await handler(request)
            except GitregError as exc:
                return _translate(request, exc, unknown, invalid)

        return endpoint

    return wrap


def _translate(request: Request, exc: GitregError, unknown: str, invalid: str) -> Response:
    message = exc.public_message()
    if isinstance(exc, InsufficientScope):
        return _error(401, "UNAUTHORIZED", message, _challenge(request, "insufficient_scope"))
    if isinstance(exc, Unauthorized):
        if message == AUTH_REQUIRED:  # worded for Terraform's credentials block
            message = OCI_AUTH_REQUIRED
        return _error(401, "UNAUTHORIZED", message, _challenge(request))
    if isinstance(exc, Forbidden):
        return _error(403, "DENIED", message)
    if isinstance(exc, TooManyRequests):
        return _error(429, "TOOMANYREQUESTS", message, {"Retry-After": str(exc.retry_after)})
    if isinstance(exc, UnknownReference):
        return _error(404, unknown, message)
    if isinstance(exc, NotFound):
        return _error(404, "NAME_UNKNOWN", message)
    if isinstance(exc, NameInvalid):
        return _error(400, "NAME_INVALID", message)
    if isinstance(exc, BadRequest):  # 413 for PayloadTooLarge
        return _error(exc.status, invalid, message)
    if exc.status == 503:
        level = log_level(exc)
        if level is not None:
            log.log(level, "%s %s: %s", request.method, request.url.path, operator_text(exc))
        retry_after = getattr(exc, "retry_after", None)
        headers = {"Retry-After": str(retry_after)} if isinstance(retry_after, int) else {}
        return _error(503, "UNAVAILABLE", message, headers)
    raise exc


def _document(request: Request, document: Document, headers: dict[str, str]) -> Response:
    headers = {
        **API_VERSION,
        **headers,
        "Docker-Content-Digest": document.digest,
        "ETag": f'"{document.digest}"',
        "Content-Length": str(document.size),
    }
    body = document.body if request.method == "GET" else b""
    return Response(body, media_type=document.media_type, headers=headers)


@_oci()
async def base(request: Request) -> Response:
    await services(request).oci.check_base(credentials(request))
    return Response(b"{}", media_type="application/json", headers=API_VERSION)


@_oci(invalid="PAGINATION_NUMBER_INVALID")
async def tags_list(request: Request) -> Response:
    name = request.path_params["name"]
    raw_n = request.query_params.get("n") or None
    if raw_n is not None and not (raw_n.isascii() and raw_n.isdigit()):
        raise BadRequest(f"n must be a non-negative integer, not {raw_n[:40]!r}")
    last = request.query_params.get("last", "")
    n = None
    if raw_n is not None:
        # Any page size is asked for (the service answers at most its own
        # page); a huge one is not parsed digit by digit.
        digits = raw_n.lstrip("0")
        n = int(digits or "0") if len(digits) < 10 else 10**9
    page = await services(request).oci.tags(functools.partial(credentials, request), name, n, last)
    # A tag list changes with every release: revalidated, and never shared
    # when its namespace is private.
    headers = {**API_VERSION, "Cache-Control": PRIVATE if page.private else "no-cache"}
    if page.more and page.tags:
        after = quote(page.tags[-1], safe="")
        size = f"n={len(page.tags)}&" if n is not None else ""
        headers["Link"] = f'</v2/{page.name}/tags/list?{size}last={after}>; rel="next"'
    body = page.body or tags_document(page.name, page.tags)
    return Response(body, media_type="application/json", headers=headers)


@_oci(unknown="MANIFEST_UNKNOWN")
async def manifest(request: Request) -> Response:
    name, reference = request.path_params["name"], request.path_params["reference"]
    found = await services(request).oci.manifest(
        functools.partial(credentials, request), name, reference
    )
    # By digest the bytes never change; by tag they may (a mirrored provider's
    # index grows as platforms are fetched), so a tag is revalidated.
    cache = IMMUTABLE if reference.startswith("sha256:") else "no-cache"
    return _document(
        request, found.document, {"Cache-Control": PRIVATE if found.private else cache}
    )


@_oci(unknown="BLOB_UNKNOWN", invalid="DIGEST_INVALID")
async def blob(request: Request) -> Response:
    name, digest = request.path_params["name"], request.path_params["digest"]
    found = await services(request).oci.blob(functools.partial(credentials, request), name, digest)
    cache = PRIVATE if found.private else IMMUTABLE
    if found.document is not None:
        return _document(request, found.document, {"Cache-Control": cache})
    assert found.layer is not None
    extra = {**API_VERSION, "Docker-Content-Digest": found.digest}
    try:
        return await stored_blob(
            request, found.layer.sha256, "application/octet-stream", found.private, extra
        )
    except NotFound as exc:  # the repository's index names this layer: the store lost it
        raise BlobMissing(f"blob {digest} of {name} is missing from the blob store") from exc


@_oci(unknown="MANIFEST_UNKNOWN", invalid="DIGEST_INVALID")
async def referrers(request: Request) -> Response:
    name, digest = request.path_params["name"], request.path_params["digest"]
    wanted = request.query_params.get("artifactType", "")
    found = await services(request).oci.referrers(
        functools.partial(credentials, request), name, digest, wanted
    )
    headers = {"Cache-Control": PRIVATE if found.private else "no-cache"}
    if wanted:
        headers["OCI-Filters-Applied"] = "artifactType"
    return _document(request, found.document, headers)


@_oci()
async def unknown_route(request: Request) -> Response:
    raise NotFound("no such OCI distribution endpoint")


async def token(request: Request) -> Response:
    """The Docker token flow's realm: `GET ?service=&scope=` with Basic or
    Bearer credentials, or the OAuth2 form `POST` (`grant_type=password` or
    `refresh_token`, a gitreg token being the password or refresh token)."""
    if request.method not in ("GET", "POST"):
        return _error(405, "UNSUPPORTED", "use GET or POST", {"Allow": "GET, POST"})
    who = credentials(request)
    try:
        scopes = request.query_params.getlist("scope")
        if request.method == "POST":
            form = await _form(request)
            grant_type = (form.get("grant_type") or [""])[0]
            if grant_type not in GRANT_TYPES:
                return _oauth_refusal(grant_type)
            secret = (form.get(grant_type) or [""])[0]
            if not secret:
                return _oauth_error("invalid_request", f"{grant_type} is required")
            who = dataclasses.replace(who, authorization=f"Bearer {secret}")
            scopes = [s for value in form.get("scope", []) for s in value.split(" ") if s]
        scopes = [s for value in scopes for s in value.split(" ") if s]
        issued = await services(request).oci.pull_token(who, scopes)
    except GitregError as exc:
        return _translate(request, exc, "NAME_UNKNOWN", "UNSUPPORTED")
    body = {
        "token": issued.token,
        "access_token": issued.token,
        "expires_in": issued.expires_in,
        "issued_at": issued.issued_at,
    }
    return Response(
        json.dumps(body).encode(),
        media_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


def _oauth_refusal(grant_type: str) -> Response:
    if not grant_type:
        return _oauth_error("invalid_request", "grant_type is required")
    return _oauth_error(
        "unsupported_grant_type",
        f"grant_type must be {' or '.join(GRANT_TYPES)}, not {grant_type[:40]!r}",
    )


def _oauth_error(error: str, description: str) -> Response:
    """RFC 6749 section 5.2, which the distribution spec's OAuth2 form follows."""
    body = json.dumps({"error": error, "error_description": description})
    return Response(
        body.encode(),
        status_code=400,
        media_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


async def _form(request: Request) -> dict[str, list[str]]:
    size = 0
    chunks: list[bytes] = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_FORM:
            raise PayloadTooLarge(f"token request over {MAX_FORM} bytes")
        chunks.append(chunk)
    try:
        return parse_qs(b"".join(chunks).decode(), max_num_fields=64)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest("the token request is not a URL-encoded form") from exc


def routes() -> list[BaseRoute]:
    """One mount: a path outside `/v2/` costs the other routes one prefix test.
    Every route takes every method, so that whatever is not a read (OPTIONS
    and WebDAV's included) is refused by the handler in the spec's words."""
    inner: list[Route] = [
        Route("/", base),
        Route("/token", token),
        Route("/{name:path}/tags/list", tags_list),
        Route("/{name:path}/manifests/{reference}", manifest),
        Route("/{name:path}/blobs/{digest}", blob),
        Route("/{name:path}/referrers/{digest}", referrers),
        Route("/{rest:path}", unknown_route),
    ]
    for route in inner:
        # Matching was compiled from the path relative to the mount; the access
        # line and the metrics name a route by `path`, which is made whole here.
        route.path = "/v2" + route.path
        route.methods = None  # every method reaches the handler (a Route's default is GET)
    return [Mount("/v2", routes=inner)]

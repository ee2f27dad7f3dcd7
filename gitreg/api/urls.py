"""Absolute URLs for what gitreg serves.

Download locations are absolute, built from `public_url` when it is set
(Terragrunt and Infracost do not resolve relative `X-Terraform-Get` values).
Otherwise they use the address the client reached us at; forwarded headers
count only when the operator said a trusted proxy sets them.
"""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.types import Scope

from gitreg.settings import Settings

_HOST = re.compile(r"^[A-Za-z0-9.\-\[\]:]{1,300}$")
# (scheme, raw Host header) -> base URL, for the hot path: a `download` answer
# would otherwise build the same string from the same two values on every
# request. Bounded: the Host header comes from clients, so a full cache
# starts over (made-up hosts cannot keep the real one out of it for good).
_bases: dict[tuple[str, bytes], str] = {}
_MAX_BASES = 256


def header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header `name` (lower case) from the ASGI scope, without
    building Starlette's `Headers` (a few headers to scan, on the hot path)."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def base_url(request: Request, settings: Settings) -> str:
    if settings.public_url:
        return settings.public_url.rstrip("/")
    if not settings.trust_forwarded:
        scope = request.scope
        key = (str(scope.get("scheme", "http")), header(scope, b"host") or b"")
        found = _bases.get(key)
        if found is not None:
            return found
        host = key[1].decode("latin-1")
        if _HOST.match(host):  # settings play no part
            if len(_bases) >= _MAX_BASES:
                _bases.clear()
            found = _bases[key] = f"{key[0]}://{host}"
            return found
    return _base_url(request, settings)


def _base_url(request: Request, settings: Settings) -> str:
    # From the scope: `request.url` would build and re-parse the whole URL.
    scheme = str(request.scope.get("scheme", "http"))
    host = request.headers.get("host", "")
    if settings.trust_forwarded:
        proto = request.headers.get("x-forwarded-proto", "").split(",")[0].strip()
        fwd_host = request.headers.get("x-forwarded-host", "").split(",")[0].strip()
        scheme = proto if proto in ("http", "https") else scheme
        host = fwd_host or host
    if not _HOST.match(host):
        host = f"{settings.host}:{settings.port}"
    return f"{scheme}://{host}"

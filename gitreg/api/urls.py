"""Absolute URLs for what gitreg serves.

Download locations are absolute, built from `public_url` when it is set
(Terragrunt and Infracost do not resolve relative `X-Terraform-Get` values).
Otherwise they use the address the client reached us at; forwarded headers
count only when the operator said a trusted proxy sets them.
"""

from __future__ import annotations

import re

from starlette.requests import Request

from gitreg.settings import Settings

_HOST = re.compile(r"^[A-Za-z0-9.\-\[\]:]{1,300}$")


def base_url(request: Request, settings: Settings) -> str:
    if settings.public_url:
        return settings.public_url.rstrip("/")
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

"""Module registry protocol, `modules.v1` (spec: module-registry-protocol.md).

    GET /v1/modules/:namespace/:name/:system/versions
    GET /v1/modules/:namespace/:name/:system/:version/download

Both answers come from the metadata cache. Download answers 204 with an
absolute `X-Terraform-Get`; a client that asks for JSON (`Accept:
application/json`, as OpenTofu does) gets 200 `{"location": ...}` with the same
header, which Terraform also accepts.
"""

from __future__ import annotations

import functools

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.addresses import ModuleAddress, module_address
from gitreg.api.credentials import credentials
from gitreg.api.responses import CachedJson, json_response
from gitreg.api.services import services
from gitreg.api.urls import base_url, header
from gitreg.canonical_json import json_bytes
from gitreg.usage.http_counting import count_module_download

PREFIX = "/v1/modules"


def _address(request: Request) -> ModuleAddress:
    p = request.path_params
    return module_address(p["namespace"], p["name"], p["system"])


async def versions(request: Request) -> Response:
    svc = services(request)
    p = request.path_params
    if svc.module_proxy.handles(p["namespace"]):
        return await _proxied_versions(request)
    body = await svc.modules.versions(
        functools.partial(credentials, request),
        p["namespace"],
        p["name"],
        p["system"],
        CachedJson.of,
    )
    return body.response(request)


def _not_found(request: Request) -> str:
    p = request.path_params
    return f"module {p['namespace']}/{p['name']}/{p['system']} not found"


async def download(request: Request) -> Response:
    svc = services(request)
    p = request.path_params
    asked = (p["namespace"], p["name"], p["system"], p["version"])
    base = base_url(request, svc.settings)
    if svc.module_proxy.handles(p["namespace"]):
        who = functools.partial(svc.access.principal, credentials(request))
        proxied = await svc.module_proxy.location(
            _address(request), p["version"], base, svc.access, who
        )
        return _download_response(request, proxied)
    location = svc.modules.cached_location(*asked, base)
    if location is None:
        location = await svc.modules.location(functools.partial(credentials, request), *asked, base)
    count_module_download(request, svc)
    return _download_response(request, location)


def _download_response(request: Request, location: str) -> Response:
    accept = header(request.scope, b"accept")
    if accept is not None and b"application/json" in accept:
        headers = {"X-Terraform-Get": location}
        return json_response(json_bytes({"location": location}), headers=headers)
    return _NoContent(location)


class _NoContent(Response):
    """The 204 answer: what `Response(status_code=204, headers=...)` builds (no
    body, so no Content-Length or Content-Type; one header), set directly
    instead of through its per-request rendering and header bookkeeping, which
    take several times as long (docs/performance.md, "Download answer");
    tests/api/test_download_answer.py compares it with a plain Response."""

    def __init__(self, location: str) -> None:
        self.status_code = 204
        self.background = None
        self.body = b""
        self.raw_headers = [(b"x-terraform-get", location.encode("latin-1"))]


async def _proxied_versions(request: Request) -> Response:
    """A namespace listed in `[[module_proxy]]` (docs/module-proxy.md): the
    versions come from the upstream registry, through gitreg/module_proxy."""
    svc = services(request)
    addr = _address(request)
    await svc.access.require_read(credentials(request), addr.namespace, _not_found(request))
    return json_response(await svc.module_proxy.versions_body(addr))


def routes() -> list[Route]:
    return [
        Route(PREFIX + "/{namespace}/{name}/{system}/versions", versions, methods=["GET"]),
        Route(
            PREFIX + "/{namespace}/{name}/{system}/{version}/download", download, methods=["GET"]
        ),
    ]

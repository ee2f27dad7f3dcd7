"""The attestations routes (docs/verify.md).

    GET /v1/modules/:namespace/:name/:system/:version/attestation
    GET /v1/attestations/keys
    GET /v1/attestations/log/checkpoint
    GET /v1/attestations/log/tile/<L>/<N>[.p/<W>]
    GET /v1/attestations/log/tile/entries/<N>[.p/<W>]

A statement follows its version's access rules; its answer names the index of
its publish entry in the log (`Gitreg-Log-Index`), where `gitreg verify`
proves its inclusion. A module of a proxied namespace (docs/module-proxy.md)
has none: 404 with `Gitreg-Not-Attested: proxied`, which `gitreg verify`
lists as unverifiable. The keys and the log are
public: log entries name no module (gitreg/attestations/service.py). Tiles
never change once served, so they are cacheable for good; the checkpoint
moves with every event.
"""

from __future__ import annotations

import functools

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.addresses import module_address
from gitreg.api.credentials import credentials
from gitreg.api.responses import error_body, json_response
from gitreg.api.services import services
from gitreg.api.urls import base_url
from gitreg.attestations.tlog import TILE_WIDTH, parse_tile_index
from gitreg.canonical_json import json_bytes
from gitreg.errors import NotFound

BASE = "/v1/attestations/"
IN_TOTO = "application/vnd.in-toto+json"
_FOREVER = {"Cache-Control": "public, max-age=31536000, immutable"}
_MAX_LEVEL = 63
LOG_INDEX = "Gitreg-Log-Index"  # where the statement's publish entry is in the log
NOT_ATTESTED = "Gitreg-Not-Attested"  # "proxied": a namespace of the module proxy


async def attestation(request: Request) -> Response:
    p = request.path_params
    address = module_address(p["namespace"], p["name"], p["system"])
    svc = services(request)
    if svc.module_proxy.handles(address.namespace):
        # Built by another registry: there is nothing gitreg could sign for it.
        not_found = f"module {address} not found"
        await svc.access.require_read(credentials(request), address.namespace, not_found)
        body = error_body(f"module {address} is proxied from another registry; it has no statement")
        return json_response(body, status=404, headers={NOT_ATTESTED: "proxied"})
    body, log_index = await svc.attestations.envelope(
        functools.partial(credentials, request), address, p["version"]
    )
    headers = {"Cache-Control": "no-cache", LOG_INDEX: str(log_index)}
    return Response(body, media_type=IN_TOTO, headers=headers)


async def keys(request: Request) -> Response:
    document = await run_in_threadpool(services(request).attestations.keys_document)
    return json_response(json_bytes(document), headers={"Cache-Control": "no-cache"})


async def checkpoint(request: Request) -> Response:
    svc = services(request)
    note = await run_in_threadpool(svc.attestations.checkpoint, base_url(request, svc.settings))
    return Response(
        note, media_type="text/plain; charset=utf-8", headers={"Cache-Control": "no-cache"}
    )


async def tile(request: Request) -> Response:
    """A hash tile or an entry bundle; 404 for a malformed path or one the log
    does not have (yet)."""
    parts = request.path_params["path"].split("/")
    width = TILE_WIDTH
    if len(parts) >= 3 and parts[-2].endswith(".p"):
        partial = parts[-1]
        if not partial.isdigit() or str(int(partial)) != partial or not 0 < int(partial) < 256:
            raise NotFound("no such tile")
        width = int(partial)
        parts = [*parts[:-2], parts[-2].removesuffix(".p")]
    if len(parts) < 2:
        raise NotFound("no such tile")
    level, index = parts[0], parse_tile_index(parts[1:])
    if index is None:
        raise NotFound("no such tile")
    svc = services(request).attestations
    if level == "entries":
        body = await run_in_threadpool(svc.entry_bundle, index, width)
    elif level.isdigit() and str(int(level)) == level and int(level) <= _MAX_LEVEL:
        body = await run_in_threadpool(svc.tile, int(level), index, width)
    else:
        raise NotFound("no such tile")
    return Response(body, media_type="application/octet-stream", headers=_FOREVER)


def routes() -> list[Route]:
    return [
        Route(
            "/v1/modules/{namespace}/{name}/{system}/{version}/attestation",
            attestation,
            methods=["GET"],
        ),
        Route(BASE + "keys", keys, methods=["GET"]),
        Route(BASE + "log/checkpoint", checkpoint, methods=["GET"]),
        Route(BASE + "log/tile/{path:path}", tile, methods=["GET"]),
    ]

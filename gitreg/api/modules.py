"""Module registry protocol, `modules.v1` (spec: module-registry-protocol.md).

    GET /v1/modules/:namespace/:name/:system/versions
    GET /v1/modules/:namespace/:name/:system/:version/download

Both answers come from the metadata cache. Download answers 204 with an
absolute `X-Terraform-Get`; a client that asks for JSON (`Accept:
application/json`, as OpenTofu does) gets 200 `{"location": ...}` with the same
header, which Terraform also accepts.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.addresses import ModuleAddress, module_address
from gitreg.api.responses import CachedJson, json_bytes, json_response
from gitreg.api.urls import archive_path, base_url
from gitreg.errors import BadRequest, NotFound
from gitreg.services import services
from gitreg.storage.index import SQLiteIndex, address_key
from gitreg.versions import NotAVersion, parse_version, sort_key

PREFIX = "/v1/modules"


def _address(request: Request) -> ModuleAddress:
    p = request.path_params
    return module_address(p["namespace"], p["name"], p["system"])


def _versions_body(index: SQLiteIndex, addr: ModuleAddress) -> CachedJson | None:
    module = index.find_module(addr.namespace, addr.name, addr.system)
    if module is None:
        return None
    listed = sorted((v.version for v in index.versions(module.id) if not v.yanked), key=sort_key)
    # One-element `modules` list, as the spec asks for forward compatibility.
    return CachedJson.of({"modules": [{"versions": [{"version": v} for v in listed]}]})


def _download_target(index: SQLiteIndex, addr: ModuleAddress, key: str) -> tuple[str, str] | None:
    module = index.find_module(addr.namespace, addr.name, addr.system)
    if module is None:
        return None
    found = index.version_by_key(module.id, key)
    return (found.archive_sha256, module.subdir) if found else None


async def versions(request: Request) -> Response:
    addr = _address(request)
    svc = services(request)
    await svc.access.require_read(request, addr.namespace, f"module {addr} not found")
    body = await svc.cache.get(
        ("module-versions", address_key(addr.namespace, addr.name, addr.system)),
        lambda: _versions_body(svc.index, addr),
    )
    if body is None:
        raise NotFound(f"module {addr} not found")
    assert isinstance(body, CachedJson)
    return body.response(request)


async def download(request: Request) -> Response:
    addr = _address(request)
    raw = request.path_params["version"]
    try:
        key = str(parse_version(raw).replace(build=None))
    except NotAVersion as exc:
        raise BadRequest(str(exc)) from exc
    svc = services(request)
    private = await svc.access.require_read(request, addr.namespace, f"module {addr} not found")
    target = await svc.cache.get(
        ("module-download", address_key(addr.namespace, addr.name, addr.system), key),
        lambda: _download_target(svc.index, addr, key),
    )
    if target is None:
        raise NotFound(f"module {addr} has no version {raw[:64]}")
    assert isinstance(target, tuple)
    sha256, subdir = target
    # `//subdir` selects a directory inside the archive, so a monorepo module
    # keeps its relative references such as `../common` (go-getter subdirs).
    location = base_url(request, svc.settings) + archive_path(sha256)
    if subdir:
        location += "//" + subdir
    if private:
        # Terraform fetches the archive without credentials: the URL carries a
        # time-limited signature instead (U2). go-getter moves a query string
        # after `//subdir` back onto the archive URL.
        location += "?" + svc.access.signer.sign(archive_path(sha256))
    headers = {"X-Terraform-Get": location}
    if "application/json" in request.headers.get("accept", ""):
        return json_response(json_bytes({"location": location}), headers=headers)
    return Response(status_code=204, headers=headers)


def routes() -> list[Route]:
    return [
        Route(PREFIX + "/{namespace}/{name}/{system}/versions", versions, methods=["GET"]),
        Route(
            PREFIX + "/{namespace}/{name}/{system}/{version}/download", download, methods=["GET"]
        ),
    ]

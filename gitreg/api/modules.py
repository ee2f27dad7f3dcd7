"""Module registry protocol, `modules.v1` (spec: module-registry-protocol.md).

    GET /v1/modules/:namespace/:name/:system/versions
    GET /v1/modules/:namespace/:name/:system/:version/download

Both answers come from the metadata cache. Download answers 204 with an
absolute `X-Terraform-Get`; a client that asks for JSON (`Accept:
application/json`, as OpenTofu does) gets 200 `{"location": ...}` with the same
header, which Terraform also accepts.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.addresses import ModuleAddress, module_address
from gitreg.api.responses import CachedJson, json_response
from gitreg.api.urls import archive_path, base_url
from gitreg.cache import MISSING
from gitreg.canonical_json import json_bytes
from gitreg.errors import BadRequest, NotAVersion, NotFound
from gitreg.services import Services, services
from gitreg.storage.index import SQLiteIndex
from gitreg.versions import parse_tag_version, sort_key

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


def _path_key(request: Request, kind: str) -> tuple[str, ...]:
    """The cache key: the path values as sent, names case-folded (versions are not:
    semver prerelease identifiers are case-sensitive). A hit skips validation and
    version parsing, since an entry exists only for input that was valid when it
    was built; `1.0.0` and `v1.0.0` simply get separate entries."""
    p = request.path_params
    names = (p["namespace"].lower(), p["name"].lower(), p["system"].lower())
    return (kind, *names, p.get("version", ""))


async def versions(request: Request) -> Response:
    svc = services(request)
    key = _path_key(request, "module-versions")
    body = svc.cache.peek(key)
    if body is MISSING:
        addr = _address(request)
        await svc.access.require_read(request, addr.namespace, _not_found(request))
        body = await svc.cache.get(key, lambda: _versions_body(svc.index, addr))
    elif not svc.access.known_public(namespace := request.path_params["namespace"]):
        await svc.access.require_read(request, namespace, _not_found(request))
    if body is None:
        raise NotFound(_not_found(request))
    assert isinstance(body, CachedJson)
    return body.response(request)


def _not_found(request: Request, version: str = "") -> str:
    p = request.path_params
    address = f"{p['namespace']}/{p['name']}/{p['system']}"
    return (
        f"module {address} has no version {version[:64]}"
        if version
        else (f"module {address} not found")
    )


def _download_lookup(svc: Services, addr: ModuleAddress, raw: str) -> Callable[[], object]:
    try:
        key = str(parse_tag_version(raw).without_build())
    except NotAVersion as exc:
        raise BadRequest(str(exc)) from exc
    return lambda: _download_target(svc.index, addr, key)


async def download(request: Request) -> Response:
    svc = services(request)
    raw = request.path_params["version"]
    key = _path_key(request, "module-download")
    target = svc.cache.peek(key)
    if target is MISSING:
        addr = _address(request)
        lookup = _download_lookup(svc, addr, raw)
        private = await svc.access.require_read(request, addr.namespace, _not_found(request))
        target = await svc.cache.get(key, lookup)
    elif svc.access.known_public(namespace := request.path_params["namespace"]):
        private = False
    else:
        private = await svc.access.require_read(request, namespace, _not_found(request))
    if target is None:
        raise NotFound(_not_found(request, raw))
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

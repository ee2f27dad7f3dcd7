"""The registry's browse and search API, in the public registry's v1 shape.

    GET /v1/modules                         ?offset&limit&provider&verified&q
    GET /v1/modules/search                  ?q&offset&limit&provider&verified
    GET /v1/modules/:namespace              a namespace's modules, latest version each
    GET /v1/modules/:namespace/:name        every system of one module
    GET /v1/modules/:namespace/:name/:system            the latest version
    GET /v1/modules/:namespace/:name/:system/download   302 to the latest's download
    GET /v1/modules/:namespace/:name/:system/:version
    GET /v1/providers/:namespace/:type      (and /:version)
    GET /v1/providers/:namespace/:type/:version/docs/:id   one documentation page

Lists carry `meta` (`limit`, `current_offset`, `next_offset`, `next_url`,
`prev_offset`) as registry.terraform.io does. Data comes from the catalog
service, told what the caller may read: a private namespace never appears in
a list, a search or a count for a caller without a read token for it, and its routes
answer as the `versions` endpoint does (401 anonymously, 404 with a token
for other namespaces), with messages naming only what was asked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gitreg.api.credentials import credentials
from gitreg.api.responses import CachedJson
from gitreg.api.services import services
from gitreg.api.urls import base_url
from gitreg.auth.tokens import Scope
from gitreg.catalog.records import Listed
from gitreg.errors import BadRequest, NotAVersion, NotFound
from gitreg.numbers import plain_int
from gitreg.providers.names import check_version
from gitreg.services import Services
from gitreg.versions import parse_tag_version

PREFIX = "/v1/modules"
DEFAULT_LIMIT = 15  # the public registry's default page size
MAX_LIMIT = 100


async def _visible(request: Request) -> Callable[[str], bool]:
    """Whether the caller may read a namespace; asks for the token only when
    some namespace is private (a bad token is 401 either way)."""
    svc = services(request)
    snapshot = await svc.access.snapshot()
    if not snapshot.any_private():
        return lambda _ns: True
    principal = await svc.access.principal(credentials(request))

    def visible(namespace: str) -> bool:
        if not snapshot.is_private(namespace):
            return True
        return principal is not None and principal.allows(Scope.read, namespace)

    return visible


def _int(request: Request, name: str, default: int, most: int) -> int:
    raw = request.query_params.get(name, "")
    if not raw:
        return default
    number = plain_int(raw)
    if number is None:
        raise BadRequest(f"{name} must be a non-negative integer")
    return min(number, most)


def _page(request: Request, svc: Services, found: list[Listed]) -> Response:
    offset = _int(request, "offset", 0, 1 << 31)
    limit = _int(request, "limit", DEFAULT_LIMIT, MAX_LIMIT) or DEFAULT_LIMIT
    provider = request.query_params.get("provider", "").lower()
    if provider:
        found = [m for m in found if m.record["provider"].lower() == provider]
    if request.query_params.get("verified", "").lower() == "true":
        found = []  # nothing in a private registry is "verified"
    page = found[offset : offset + limit]
    meta: dict[str, Any] = {"limit": limit, "current_offset": offset}
    if offset + limit < len(found):
        params = dict(request.query_params) | {"offset": str(offset + limit), "limit": str(limit)}
        meta["next_offset"] = offset + limit
        meta["next_url"] = f"{request.url.path}?{urlencode(params)}"
    if offset > 0:
        meta["prev_offset"] = max(offset - limit, 0)
    # `downloads`: the module's total over all versions, as the public registry
    # counts it, from the counter's totals (refreshed on each flush).
    totals = svc.downloads.total
    records = [m.record | {"downloads": totals("module", m.module_id)} for m in page]
    body = {"meta": meta, "modules": records}
    return CachedJson.of(body).response(request)


async def list_modules(request: Request) -> Response:
    if request.query_params.get("q", "").strip():
        return await search(request)
    svc = services(request)
    return _page(request, svc, await svc.catalog.modules(await _visible(request)))


async def search(request: Request) -> Response:
    svc = services(request)
    query = request.query_params.get("q", "").strip()
    if not query:
        raise BadRequest("q is required: the words to search for")
    if len(query) > 200:
        raise BadRequest("q is longer than 200 characters")
    found = await svc.catalog.search(query, await _visible(request))
    return _page(request, svc, found)


async def namespace_modules(request: Request) -> Response:
    svc = services(request)
    visible = await _visible(request)
    # An unreadable namespace lists as empty, exactly like one that does not exist.
    found = await svc.catalog.modules(visible, request.path_params["namespace"])
    return _page(request, svc, found)


async def module_systems(request: Request) -> Response:
    svc = services(request)
    p = request.path_params
    visible = await _visible(request)
    return _page(request, svc, await svc.catalog.modules(visible, p["namespace"], p["name"]))


@dataclass
class _Page:
    """A module or provider version's record, cached until a publish, and its
    answer, serialised again only when its download total moved (after a flush)."""

    kind: str  # "module" or "provider": whose download total it shows
    object_id: int
    record: dict[str, Any]
    downloads: int = -1
    answer: CachedJson | None = None

    @property
    def body(self) -> bytes:
        """What the metadata cache sizes this entry by (`entry_bytes`): a
        record with its README is kilobytes, not one small entry."""
        return self.answer.body if self.answer is not None else b""

    def answer_for(self, downloads: int) -> CachedJson:
        answer = self.answer
        if answer is None or downloads != self.downloads:
            # Event loop thread only once cached: a concurrent request sees either answer.
            answer = CachedJson.of(self.record | {"downloads": downloads})
            self.answer, self.downloads = answer, downloads
        return answer

    def response(self, svc: Services, request: Request) -> Response:
        downloads = svc.downloads.total(self.kind, self.object_id)
        return self.answer_for(downloads).response(request)


def _module_body(svc: Services, request: Request, version: str | None) -> _Page | None:
    p = request.path_params
    names = (p["namespace"], p["name"], p["system"])
    found = svc.catalog.module_version(names, version)
    if found is None:
        return None
    page = _Page("module", found.module_id, found.record)
    page.answer_for(svc.downloads.total("module", found.module_id))  # serialised in the loader
    return page


async def _module(request: Request, version: str | None) -> _Page:
    svc = services(request)
    p = request.path_params
    where = f"module {p['namespace']}/{p['name']}/{p['system']}"
    if version is not None:
        _check_version(version)
    not_found = f"{where} not found" if version is None else f"{where} {version} not found"
    await svc.access.require_read(credentials(request), p["namespace"], not_found)
    key = ("browse-module", *(p[k].lower() for k in ("namespace", "name", "system")), version)
    body = await svc.cache.get(key, lambda: _module_body(svc, request, version))
    if body is None:
        raise NotFound(not_found)
    assert isinstance(body, _Page)
    return body


def _check_version(version: str) -> None:
    """400 for a path part that is no version, before the access check, as
    the `/VERSION/download` endpoints answer it."""
    try:
        parse_tag_version(version)
    except NotAVersion as exc:
        raise BadRequest(str(exc)) from exc


async def latest(request: Request) -> Response:
    return (await _module(request, None)).response(services(request), request)


async def one_version(request: Request) -> Response:
    page = await _module(request, request.path_params["version"])
    return page.response(services(request), request)


async def download_latest(request: Request) -> Response:
    """302 to the latest version's `download` endpoint, as the public registry does."""
    page = await _module(request, None)
    p = request.path_params
    version = page.record["version"]
    base = base_url(request, services(request).settings)
    target = f"{base}{PREFIX}/{p['namespace']}/{p['name']}/{p['system']}/{version}/download"
    return RedirectResponse(target, status_code=302)


async def _provider(request: Request, version: str | None) -> Response:
    svc = services(request)
    p = request.path_params
    not_found = f"provider {p['namespace']}/{p['type']} not found"
    if version is not None:
        version = check_version(version)
    await svc.access.require_read(credentials(request), p["namespace"], not_found)
    found = await svc.catalog.provider(p["namespace"], p["type"])
    if version is not None:
        not_found = f"provider {p['namespace']}/{p['type']} {version} not found"
    if found is None:
        raise NotFound(not_found)
    key = ("browse-provider", p["namespace"].lower(), p["type"].lower(), version)
    page = await svc.cache.get(key, lambda: _provider_page(svc, p, version))
    if page is None:
        raise NotFound(not_found)
    assert isinstance(page, _Page)
    return page.response(svc, request)


def _provider_page(svc: Services, p: dict[str, Any], version: str | None) -> _Page | None:
    """One version's answer, serialised in the loader (not per request on the
    event loop: a release lists all its doc pages)."""
    found = svc.catalog.provider_release(p["namespace"], p["type"], version)
    if found is None:
        return None
    page = _Page("provider", found.provider_id, found.body)
    page.answer_for(svc.downloads.total("provider", found.provider_id))
    return page


async def provider_latest(request: Request) -> Response:
    return await _provider(request, None)


async def provider_version(request: Request) -> Response:
    return await _provider(request, request.path_params["version"])


async def provider_doc_page(request: Request) -> Response:
    """One page of a provider version's docs, as rendered at ingest."""
    svc = services(request)
    p = request.path_params
    where = f"provider {p['namespace']}/{p['type']} {p['version']}"
    not_found = f"{where} has no documentation page {p['id'][:100]}"
    await svc.access.require_read(
        credentials(request), p["namespace"], f"provider {p['namespace']}/{p['type']} not found"
    )
    key = ("browse-provider-doc", p["namespace"].lower(), p["type"].lower(), p["version"], p["id"])
    found = await svc.cache.get(key, lambda: _doc_answer(svc, p))
    if not isinstance(found, CachedJson):
        raise NotFound(not_found)
    return found.response(request)


def _doc_answer(svc: Services, p: dict[str, Any]) -> CachedJson | None:
    """A doc page serialised once, in the loader: its HTML is not encoded
    again per request, and the cache's byte bound sees the page's size."""
    found = svc.catalog.provider_doc(p["namespace"], p["type"], p["version"], p["id"])
    if found is None:
        return None
    fields = ("id", "title", "path", "category", "slug", "subcategory")
    return CachedJson.of({k: found[k] for k in fields} | {"content_html": found["html"]})


def routes() -> list[Route]:
    """After modules.routes() and providers.routes() in app.py, so their
    `/versions` and `/download` paths match before `{version}` here."""
    three = PREFIX + "/{namespace}/{name}/{system}"
    return [
        Route(PREFIX, list_modules, methods=["GET"]),
        Route(PREFIX + "/search", search, methods=["GET"]),
        Route(PREFIX + "/{namespace}", namespace_modules, methods=["GET"]),
        Route(PREFIX + "/{namespace}/{name}", module_systems, methods=["GET"]),
        Route(three, latest, methods=["GET"]),
        Route(three + "/download", download_latest, methods=["GET"]),
        Route(three + "/{version}", one_version, methods=["GET"]),
        Route("/v1/providers/{namespace}/{type}", provider_latest, methods=["GET"]),
        Route("/v1/providers/{namespace}/{type}/{version}", provider_version, methods=["GET"]),
        Route(
            "/v1/providers/{namespace}/{type}/{version}/docs/{id}",
            provider_doc_page,
            methods=["GET"],
        ),
    ]

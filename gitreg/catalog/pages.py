"""Home, search, a namespace's modules, providers list and the mirror page.

Every list is filtered for its reader before it is counted or paged, so a
private namespace the reader may not see changes no number on any page.
"""

from __future__ import annotations

from collections import Counter
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from gitreg.api.services import services
from gitreg.catalog.records import Listed
from gitreg.numbers import plain_int
from gitreg.ui.pages import Page, not_found_page, render, ui_state
from gitreg.ui.viewer import current_viewer

PAGE_SIZE = 20
RECENT = 10
MAX_QUERY = 200
SORTS = (
    ("relevance", "Relevance"),
    ("recent", "Recently published"),
    ("downloads", "Downloads (30 days)"),
)
_SORT_NAMES = {name for name, _ in SORTS}


async def home(request: Request) -> Response:
    svc = services(request)
    viewer = await current_viewer(request)
    state, generation = ui_state(request), svc.cache.generation
    key = ("home", viewer.key)
    if (cached := state.pages.get(key, generation)) is not None:
        return cached.response(request)
    modules = await svc.catalog.modules(viewer.may_read)
    recent = sorted(modules, key=lambda m: m.record["published_at"], reverse=True)[:RECENT]
    counts = Counter(m.namespace for m in modules)
    providers = await svc.catalog.providers(viewer.may_read)
    context = {
        "title": "Terraform registry",
        "recent": _with_downloads(request, recent),
        "namespaces": sorted(counts.items(), key=lambda c: c[0].lower()),
        "providers": providers,
        "module_count": len(modules),
    }
    page = Page(render(request, viewer, "home.html", context))
    state.pages.put(key, page, generation)
    return page.response(request)


def _page_number(request: Request) -> int:
    number = plain_int(request.query_params.get("page", "") or "1")
    return max(1, min(number or 1, 1 << 20))


def _with_downloads(
    request: Request, found: list[Listed], recent: dict[int, int] | None = None
) -> list[dict[str, Any]]:
    """The records with each module's download total (all versions, as of
    the counter's last flush) and, given `recent`, its last 30 days':
    aggregate counts only, never who."""
    total = services(request).downloads.total
    records = [m.record | {"downloads": total("module", m.module_id)} for m in found]
    if recent is not None:
        for m, record in zip(found, records, strict=True):
            record["recent_downloads"] = recent.get(m.module_id, 0)
    return records


def _paged(
    request: Request, found: list[Listed], number: int, recent: dict[int, int] | None = None
) -> dict[str, Any]:
    pages = max(1, -(-len(found) // PAGE_SIZE))
    number = min(number, pages)
    start = (number - 1) * PAGE_SIZE
    return {
        "results": _with_downloads(request, found[start : start + PAGE_SIZE], recent),
        "total": len(found),
        "page": number,
        "pages": pages,
    }


async def search(request: Request) -> Response:
    """Words, filters (namespace, system, has examples) and an order; with
    no words, the filters apply to every module. Providers whose address
    holds every word are listed beside the modules. Counts per namespace and
    system are of the words' matches, before the filters."""
    svc = services(request)
    viewer = await current_viewer(request)
    params = request.query_params
    query = " ".join(params.get("q", "").split())[:MAX_QUERY]
    namespace, system = params.get("namespace", "")[:100], params.get("provider", "")[:100]
    examples = params.get("examples", "") == "1"
    sort = params.get("sort", "") if params.get("sort", "") in _SORT_NAMES else "relevance"
    asked = bool(query or namespace or system or examples or "sort" in params)
    found: list[Listed] = []
    if query:
        found = await svc.catalog.search(query, viewer.may_read)
    elif asked:
        found = await svc.catalog.modules(viewer.may_read)
    namespaces = Counter(m.namespace for m in found)
    systems = Counter(m.record["provider"] for m in found)
    found = [
        m
        for m in found
        if (not namespace or m.namespace.lower() == namespace.lower())
        and (not system or m.record["provider"].lower() == system.lower())
        and (not examples or m.has_examples)
    ]
    if sort == "recent":
        found.sort(key=lambda m: m.record["published_at"], reverse=True)
    recent: dict[int, int] | None = None
    if sort == "downloads":
        recent = await run_in_threadpool(svc.usage.recent_module_downloads)
        total = svc.downloads.total
        found.sort(
            key=lambda m: (recent.get(m.module_id, 0), total("module", m.module_id)), reverse=True
        )
    providers: list[tuple[str, str]] = []
    if query:
        words = query.lower().split()
        providers = [
            p
            for p in await svc.catalog.providers(viewer.may_read)
            if all(w in f"{p[0]}/{p[1]}".lower() for w in words)
            and (not namespace or p[0].lower() == namespace.lower())
        ]
    kept = {"q": query, "namespace": namespace, "provider": system}
    kept |= {"sort": sort} if sort != "relevance" else {}
    kept |= {"examples": "1"} if examples else {}
    context = {
        "title": f"Search: {query}" if query else "Search",
        "q": query,
        "asked": asked,
        "namespace": namespace,
        "system": system,
        "examples": examples,
        "sort": sort,
        "sorts": SORTS,
        "namespaces": sorted(namespaces.items(), key=lambda c: c[0].lower()),
        "systems": sorted(systems.items(), key=lambda c: c[0].lower()),
        "providers": providers,
        "base": "/search?" + urlencode({k: v for k, v in kept.items() if v}) + "&",
    }
    context |= _paged(request, found, _page_number(request), recent)
    return Page(render(request, viewer, "search.html", context)).response(request)


async def namespace(request: Request) -> Response:
    svc = services(request)
    viewer = await current_viewer(request)
    name = request.path_params["namespace"]
    if not viewer.may_read(name):
        return not_found_page(request, viewer)
    found = await svc.catalog.modules(viewer.may_read, name)
    providers = await svc.catalog.providers(viewer.may_read, name)
    if not found and not providers:
        return not_found_page(request, viewer)
    context = {"title": name, "namespace": name, "providers": providers}
    context |= _paged(request, found, _page_number(request))
    return Page(render(request, viewer, "namespace.html", context)).response(request)


async def mirror(request: Request) -> Response:
    svc = services(request)
    viewer = await current_viewer(request)
    providers, modules = await svc.catalog.mirrored(viewer.may_read)
    context = {"title": "Mirror", "providers": providers, "modules": modules}
    return Page(render(request, viewer, "mirror.html", context)).response(request)

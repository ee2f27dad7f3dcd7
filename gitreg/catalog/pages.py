"""Home, search, a namespace's modules, providers list and the mirror page.

Every list is filtered for its reader before it is counted or paged, so a
private namespace the reader may not see changes no number on any page.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

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


async def home(request: Request) -> Response:
    svc = services(request)
    viewer = await current_viewer(request)
    state, generation = ui_state(request), svc.cache.generation
    key = ("home", viewer.key)
    if (cached := state.pages.get(key, generation)) is not None:
        return cached.response(request)
    modules = await svc.catalog_service.modules(viewer.may_read)
    recent = sorted(modules, key=lambda m: m.record["published_at"], reverse=True)[:RECENT]
    counts = Counter(m.namespace for m in modules)
    providers = await svc.catalog_service.providers(viewer.may_read)
    context = {
        "title": "Terraform registry",
        "recent": [m.record for m in recent],
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


def _paged(found: list[Listed], number: int) -> dict[str, Any]:
    pages = max(1, -(-len(found) // PAGE_SIZE))
    number = min(number, pages)
    start = (number - 1) * PAGE_SIZE
    return {
        "results": [m.record for m in found[start : start + PAGE_SIZE]],
        "total": len(found),
        "page": number,
        "pages": pages,
    }


async def search(request: Request) -> Response:
    svc = services(request)
    viewer = await current_viewer(request)
    query = " ".join(request.query_params.get("q", "").split())[:MAX_QUERY]
    found: list[Listed] = []
    if query:
        found = await svc.catalog_service.search(query, viewer.may_read)
    context = {"title": f"Search: {query}" if query else "Search", "q": query}
    context |= _paged(found, _page_number(request))
    return Page(render(request, viewer, "search.html", context)).response(request)


async def namespace(request: Request) -> Response:
    svc = services(request)
    viewer = await current_viewer(request)
    name = request.path_params["namespace"]
    if not viewer.may_read(name):
        return not_found_page(request, viewer)
    found = await svc.catalog_service.modules(viewer.may_read, name)
    providers = await svc.catalog_service.providers(viewer.may_read, name)
    if not found and not providers:
        return not_found_page(request, viewer)
    context = {"title": name, "namespace": name, "providers": providers}
    context |= _paged(found, _page_number(request))
    return Page(render(request, viewer, "namespace.html", context)).response(request)


async def mirror(request: Request) -> Response:
    svc = services(request)
    viewer = await current_viewer(request)
    providers, modules = await svc.catalog_service.mirrored(viewer.may_read)
    context = {"title": "Mirror", "providers": providers, "modules": modules}
    return Page(render(request, viewer, "mirror.html", context)).response(request)

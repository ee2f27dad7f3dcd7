"""`/providers/NS/TYPE[/VERSION]`: a provider hosted by this registry.

Shows the `required_providers` block, each platform, the signing key ids and
the documents the release ships (`docs` entries of the provider record, each
linked to its own page under `/providers/NS/TYPE/VERSION/docs/ID`).
"""

from __future__ import annotations

from itertools import groupby
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from gitreg.api.services import services
from gitreg.api.urls import base_url
from gitreg.catalog import paths
from gitreg.catalog.records import choose_release
from gitreg.catalog.snippets import host_of, provider_snippet
from gitreg.ui.pages import Page, not_found_page, render, ui_state
from gitreg.ui.viewer import current_viewer

# The public registry's order and names of documentation categories.
CATEGORIES = {
    "overview": "Overview",
    "guides": "Guides",
    "resources": "Resources",
    "data-sources": "Data Sources",
    "ephemeral-resources": "Ephemeral Resources",
    "list-resources": "List Resources",
    "actions": "Actions",
    "functions": "Functions",
}
_TYPED = ("resources", "data-sources", "ephemeral-resources", "list-resources", "actions")


def provider_path(namespace: str, type_: str, version: str | None = None) -> str:
    return paths.provider_path(namespace, type_, version)


def doc_name(entry: dict[str, Any], type_: str) -> str:
    """How a page is named in the navigation: a resource or data source by
    its full type (`ourcloud_server`, not `server`), a guide by its title."""
    slug = str(entry.get("slug") or entry.get("id", ""))
    if entry.get("category") in _TYPED:
        return slug if slug.startswith(f"{type_}_") else f"{type_}_{slug}"
    return str(entry.get("title") or slug)


def doc_navigation(docs: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    """The release's pages by category (in the public registry's order), then
    by subcategory (front matter; pages without one first), then by name:
    [{label, groups: [{subcategory, docs: [entry + name]}]}]."""
    order = list(CATEGORIES)

    def rank(entry: dict[str, Any]) -> tuple[int, str, str, str]:
        category = str(entry.get("category", ""))
        place = order.index(category) if category in order else len(order)
        return (place, category, str(entry.get("subcategory", "")).lower(), entry["name"])

    named = sorted(({**d, "name": doc_name(d, type_)} for d in docs), key=rank)
    found = []
    for category, in_category in groupby(named, key=lambda d: str(d.get("category", ""))):
        groups = [
            {"subcategory": sub, "docs": list(entries)}
            for sub, entries in groupby(in_category, key=lambda d: str(d.get("subcategory", "")))
        ]
        found.append({"label": CATEGORIES.get(category, category.title()), "groups": groups})
    return found


async def provider_page(request: Request) -> Response:
    svc = services(request)
    viewer = await current_viewer(request)
    p = request.path_params
    version = p.get("version")
    if not viewer.may_read(p["namespace"]):
        return not_found_page(request, viewer)
    base = base_url(request, svc.settings)
    key = ("provider", p["namespace"].lower(), p["type"].lower(), version, viewer.key, base)
    state, generation = ui_state(request), svc.cache.generation
    if (cached := state.pages.get(key, generation)) is not None:
        return cached.response(request)
    found = await svc.catalog.provider(p["namespace"], p["type"])
    chosen = choose_release(found, version) if found is not None else None
    if found is None or chosen is None:
        return not_found_page(request, viewer)
    page = Page(render(request, viewer, "provider.html", _context(found, chosen, host_of(base))))
    state.pages.put(key, page, generation)
    return page.response(request)


async def provider_doc_page(request: Request) -> Response:
    """`/providers/NS/TYPE/VERSION/docs/ID`: one page of the release's docs/
    folder, rendered and sanitised at ingest like a README."""
    svc = services(request)
    viewer = await current_viewer(request)
    p = request.path_params
    if not viewer.may_read(p["namespace"]):
        return not_found_page(request, viewer)
    names = (p["namespace"], p["type"], p["version"], p["doc_id"])
    key = ("provider-doc", *(n.lower() for n in names[:2]), *names[2:], viewer.key)
    state, generation = ui_state(request), svc.cache.generation
    if (cached := state.pages.get(key, generation)) is not None:
        return cached.response(request)
    found = await svc.catalog.provider(p["namespace"], p["type"])
    # Read per page, not kept in the metadata cache (a page may be megabytes):
    # the rendered page is cached instead, like every other page.
    doc = await run_in_threadpool(svc.catalog.provider_doc, *names)
    if found is None or doc is None:
        return not_found_page(request, viewer)
    ns, type_, version = found["namespace"], found["name"], p["version"]
    chosen = choose_release(found, version)
    context = {
        "nav": doc_navigation(_linked(ns, type_, version, chosen), type_),
        "current": doc["id"],
        "doc_name": doc_name(doc, type_),
        "title": f"{doc_name(doc, type_)} - {ns}/{type_}",
        "provider": found,
        "version": version,
        "doc": doc,
        "provider_url": provider_path(ns, type_, version),
    }
    page = Page(render(request, viewer, "provider_doc.html", context))
    state.pages.put(key, page, generation)
    return page.response(request)


def _linked(
    ns: str, type_: str, version: str, chosen: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The release's `docs` entries, each with the `url` of its page."""
    base = provider_path(ns, type_, version) + "/docs/"
    return [
        d | {"url": base + quote(str(d["id"]), safe="")}
        for d in (chosen or {}).get("docs", [])
        if isinstance(d, dict) and "id" in d
    ]


def _context(found: dict[str, Any], chosen: dict[str, Any], host: str) -> dict[str, Any]:
    ns, type_, version = found["namespace"], found["name"], chosen["version"]
    docs = _linked(ns, type_, version, chosen)
    return {
        "nav": doc_navigation(docs, type_),
        "title": f"{ns}/{type_}",
        "provider": found,
        "release": chosen,
        "docs": docs,
        "snippet": provider_snippet(host, ns, type_, version),
        "version_path": lambda v: provider_path(ns, type_, v),
        "latest": found["latest"],
    }

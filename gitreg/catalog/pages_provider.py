"""`/providers/NS/TYPE[/VERSION]`: a provider hosted by this registry.

Shows the `required_providers` block, each platform, the signing key ids and
the documents the release ships (`docs` entries of the provider record, each
linked to its own page under `/providers/NS/TYPE/VERSION/docs/ID`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from gitreg.api.services import services
from gitreg.api.urls import base_url
from gitreg.catalog.records import choose_release
from gitreg.catalog.snippets import host_of, provider_snippet
from gitreg.ui.pages import Page, not_found_page, render, ui_state
from gitreg.ui.viewer import current_viewer


def provider_path(namespace: str, type_: str, version: str | None = None) -> str:
    parts = [namespace, type_] + ([version] if version else [])
    return "/providers/" + "/".join(quote(p, safe="") for p in parts)


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
    found = await svc.catalog_service.provider(p["namespace"], p["type"])
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
    found = await svc.catalog_service.provider(p["namespace"], p["type"])
    # Read per page, not kept in the metadata cache (a page may be megabytes):
    # the rendered page is cached instead, like every other page.
    doc = await run_in_threadpool(svc.catalog_service.provider_doc, *names)
    if found is None or doc is None:
        return not_found_page(request, viewer)
    ns, type_, version = found["namespace"], found["name"], p["version"]
    context = {
        "title": f"{doc.get('title') or doc['id']} - {ns}/{type_}",
        "provider": found,
        "version": version,
        "doc": doc,
        "provider_url": provider_path(ns, type_, version),
    }
    page = Page(render(request, viewer, "provider_doc.html", context))
    state.pages.put(key, page, generation)
    return page.response(request)


def _context(found: dict[str, Any], chosen: dict[str, Any], host: str) -> dict[str, Any]:
    ns, type_, version = found["namespace"], found["name"], chosen["version"]
    docs = [
        d | {"url": provider_path(ns, type_, version) + "/docs/" + quote(str(d["id"]), safe="")}
        for d in chosen.get("docs", [])
        if isinstance(d, dict) and "id" in d
    ]
    return {
        "title": f"{ns}/{type_}",
        "provider": found,
        "release": chosen,
        "docs": docs,
        "snippet": provider_snippet(host, ns, type_, version),
        "version_path": lambda v: provider_path(ns, type_, v),
        "latest": found["latest"],
    }

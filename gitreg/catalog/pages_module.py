"""`/modules/NS/NAME/SYSTEM[/VERSION]`: one module version, with tabs.

Each tab is a link (`?tab=inputs`) and every panel is in the page, hidden
unless selected, so the page works without JavaScript; ui.js only switches
panels in place and keeps the URL in step. The version picker is a GET form
that `?version=` answers with a redirect to that version's page.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from gitreg.api.services import services
from gitreg.api.urls import base_url
from gitreg.catalog import paths
from gitreg.catalog.dependencies import dependency_links
from gitreg.catalog.readme import first_prose
from gitreg.catalog.records import ModuleView
from gitreg.catalog.snippets import host_of, module_snippet
from gitreg.ui.pages import Page, not_found_page, render, ui_state
from gitreg.ui.viewer import current_viewer
from gitreg.usage.pages import may_see_usage, usage_path
from gitreg.versions import latest

TABS = (
    ("readme", "README"),
    ("inputs", "Inputs"),
    ("outputs", "Outputs"),
    ("resources", "Resources"),
    ("dependencies", "Dependencies"),
    ("submodules", "Submodules"),
    ("examples", "Examples"),
    ("versions", "Versions"),
)
_TAB_NAMES = {name for name, _ in TABS}


def _names(request: Request) -> tuple[str, str, str]:
    p = request.path_params
    return p["namespace"], p["name"], p["system"]


def module_path(record: dict[str, Any], version: str | None = None) -> str:
    return paths.module_path(record["namespace"], record["name"], record["provider"], version)


async def served(request: Request) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """The modules and providers this reader may see: where dependencies link."""
    viewer = await current_viewer(request)
    catalog = services(request).catalog
    modules = await catalog.modules(viewer.may_read)
    providers = await catalog.providers(viewer.may_read)
    return [(m.namespace, m.record["name"], m.record["provider"]) for m in modules], providers


async def module_page(request: Request) -> Response:
    svc = services(request)
    viewer = await current_viewer(request)
    names = _names(request)
    version = request.path_params.get("version")
    picked = request.query_params.get("version", "")
    if not viewer.may_read(names[0]):
        return not_found_page(request, viewer)
    tab = request.query_params.get("tab", "readme")
    tab = tab if tab in _TAB_NAMES else "readme"
    base = base_url(request, svc.settings)
    # Whether the "Usage" tab shows: a read and a publish token may share a key.
    usage = may_see_usage(viewer, names[0])
    key = ("module", *(n.lower() for n in names), version, tab, viewer.key, usage, base)
    state, generation = ui_state(request), svc.cache.generation
    if not picked and (cached := state.pages.get(key, generation)) is not None:
        return cached.response(request)
    found = await svc.catalog.module(names, version)
    if found is None:
        return not_found_page(request, viewer)
    if picked:
        if picked not in found.record["versions"]:
            return not_found_page(request, viewer)
        keep = f"?tab={tab}" if tab != "readme" else ""  # the reader stays on their tab
        return RedirectResponse(module_path(found.record, picked) + keep, status_code=303)
    context = _context(found, tab, host_of(base))
    page_path = module_path(found.record, found.record["version"])
    host = host_of(base)
    context["dep_links"] = dependency_links(
        found.record["root"], "", page_path, host, *await served(request)
    )
    context["downloads"] = svc.downloads.total("module", found.module_id)
    context["usage_path"] = usage_path(*names) if usage else ""
    context["version_usage"] = usage_path(*names, found.record["version"]) if usage else ""
    page = Page(render(request, viewer, "module.html", context))
    state.pages.put(key, page, generation)
    return page.response(request)


def _context(found: ModuleView, tab: str, host: str) -> dict[str, Any]:
    record = found.record
    return {
        "title": f"{record['namespace']}/{record['name']}/{record['provider']}",
        "m": record,
        "module_path": module_path(record),
        "version_path": lambda v: module_path(record, v),
        "tabs": TABS,
        "tab": tab,
        "yanked": found.yanked,
        "moved": found.moved,
        "snippet": module_snippet(host, record, yanked=found.yanked),
        "page": module_path(record, record["version"]),
        "summary": lambda sub: first_prose(str(sub.get("readme_html", ""))),
        "latest": latest(record["versions"], str),
        "commit_url": _commit_url(record),
    }


def _commit_url(record: dict[str, Any]) -> str:
    """The forge's page for the commit, when the source has a web address."""
    source, commit = str(record.get("source", "")), str(record.get("commit", ""))
    if source.startswith("https://") and commit:
        return f"{source}/commit/{commit}"
    return ""

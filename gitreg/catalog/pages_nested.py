"""A module version's submodules and examples, each on a page of its own:

    GET /modules/NS/NAME/SYSTEM/VERSION/modules/SUB      a submodule
    GET /modules/NS/NAME/SYSTEM/VERSION/examples/NAME    an example

A submodule's page has its README, inputs, outputs, resources and
dependencies and the block that calls it (`//modules/SUB` after the
module's address). An example's page shows the same and its `.tf` files,
highlighted, from the version's archive (what `terraform init` installs).
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from gitreg.api.services import services
from gitreg.api.urls import base_url
from gitreg.catalog.archive_files import ArchiveFile
from gitreg.catalog.dependencies import dependency_links
from gitreg.catalog.pages_module import module_path, served
from gitreg.catalog.readme import first_prose
from gitreg.catalog.snippets import host_of, module_snippet
from gitreg.ui.pages import Page, not_found_page, render, ui_state
from gitreg.ui.viewer import current_viewer

KINDS = {"modules": "submodules", "examples": "examples"}


async def submodule_page(request: Request) -> Response:
    return await _nested_page(request, "modules")


async def example_page(request: Request) -> Response:
    return await _nested_page(request, "examples")


async def _nested_page(request: Request, kind: str) -> Response:
    svc = services(request)
    viewer = await current_viewer(request)
    p = request.path_params
    names = (p["namespace"], p["name"], p["system"])
    if not viewer.may_read(names[0]):
        return not_found_page(request, viewer)
    base = base_url(request, svc.settings)
    key = ("nested", *(n.lower() for n in names), p["version"], kind, p["sub"], viewer.key, base)
    state, generation = ui_state(request), svc.cache.generation
    if (cached := state.pages.get(key, generation)) is not None:
        return cached.response(request)
    found = await svc.catalog.module(names, p["version"])
    path = f"{kind}/{p['sub']}"
    items = found.record[KINDS[kind]] if found is not None else []
    nested = next((m for m in items if m.get("path") == path), None)
    if found is None or nested is None:
        return not_found_page(request, viewer)
    record, host = found.record, host_of(base)
    page_path = module_path(record, record["version"])
    files: list[ArchiveFile] | None = []
    if kind == "examples":
        read = svc.catalog.module_directory_files
        files = await run_in_threadpool(read, names, record["version"], path, ".tf")
    context = {
        "title": f"{'/'.join(names)}//{path}",
        "m": record,
        "sub": nested,
        "kind": kind,
        "page": page_path,
        "module_url": page_path,
        "summary": first_prose(str(nested.get("readme_html", ""))),
        "snippet": module_snippet(host, record, nested, found.yanked) if kind == "modules" else "",
        "files": files or [],
        "dep_links": dependency_links(nested, path, page_path, host, *await served(request)),
        "yanked": found.yanked,
    }
    page = Page(render(request, viewer, "nested.html", context))
    state.pages.put(key, page, generation)
    return page.response(request)

"""`/modules/NS/NAME/SYS/changes?version=&from=`: the module page's "Changes" tab.

The classified diff between two versions (the chosen one and, by default, the
version before it), with a GET form to pick any two, and the versions the
semver guard refused. Readable by whoever may read the module's namespace;
anyone else gets the same 404 page as for a module that does not exist.
Rendered per request: the diff of two stored documents takes milliseconds.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from gitreg.api.services import services
from gitreg.errors import BadRequest, NotFound
from gitreg.semver_guard.diff import KINDS
from gitreg.semver_guard.service import label
from gitreg.ui.pages import error_page, html_response, not_found_page, render
from gitreg.ui.viewer import current_viewer

HEADERS = {"Cache-Control": "private, no-cache"}
KIND_TITLES = {
    "breaking": "Breaking",
    "possibly_breaking": "Possibly breaking",
    "additive": "Additive",
    "other": "Other",
}


async def changes_page(request: Request) -> Response:
    p = request.path_params
    names = (p["namespace"], p["name"], p["system"])
    viewer = await current_viewer(request)
    if not viewer.may_read(names[0]):
        return not_found_page(request, viewer)
    version = request.query_params.get("version") or None
    base = request.query_params.get("from") or None
    svc = services(request)
    try:
        found = await run_in_threadpool(svc.semver.changes_view, names, version, base)
    except NotFound:
        return not_found_page(request, viewer)
    except BadRequest as exc:
        return error_page(request, viewer, 400, "Bad request", str(exc))
    module_path = "/modules/" + "/".join(quote(n, safe="") for n in names)
    changes = found.changes
    context = {
        "title": f"Changes in {changes.module} {changes.version}",
        "names": names,
        "module_path": module_path,
        "c": changes,
        "label": label(changes.check),
        "groups": [(KIND_TITLES[k], k, [x for x in changes.changes if x.kind == k]) for k in KINDS],
        "versions": found.versions,
        "refused": [(r, label(r)) for r in found.refused],
    }
    body = render(request, viewer, "semver_changes.html", context)
    return html_response(body, headers=HEADERS)

"""`/modules/NS/NAME/SYS/usage`: the module page's "Usage" tab.

Who downloaded which versions lately (gitreg/usage/service.py), for readers
with `publish` or `admin` on the namespace only: a signed-in person through
their session's grants, or a browser presenting such a token in its cookie
(gitreg/ui/viewer.py). Everyone else gets the same 404 page as for a module
that does not exist, and the module page shows them no "Usage" tab. The page
names people, so it is rendered for each request and never enters the page
cache (`Cache-Control: private, no-store`); `?versions=` and `?days=` filter
it as the API's parameters do (a deprecated version's banner links here with
its own version).
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from gitreg.api.services import services
from gitreg.auth.tokens import Scope
from gitreg.errors import BadRequest, NotFound
from gitreg.numbers import plain_int
from gitreg.ui.pages import error_page, html_response, not_found_page, render
from gitreg.ui.viewer import Viewer, current_viewer
from gitreg.usage.service import DEFAULT_DAYS

NO_STORE = {"Cache-Control": "private, no-store"}


def may_see_usage(viewer: Viewer, namespace: str) -> bool:
    """Publish or admin on the namespace, from a session or a token cookie."""
    return viewer.principal is not None and viewer.principal.allows(Scope.publish, namespace)


def usage_path(namespace: str, name: str, system: str, versions: str = "") -> str:
    path = "/modules/" + "/".join(quote(p, safe="") for p in (namespace, name, system)) + "/usage"
    return path + (f"?versions={quote(versions, safe='')}" if versions else "")


async def usage_page(request: Request) -> Response:
    p = request.path_params
    names = (p["namespace"], p["name"], p["system"])
    viewer = await current_viewer(request)
    if not may_see_usage(viewer, names[0]):
        return not_found_page(request, viewer)
    versions = request.query_params.get("versions", "")
    days_text = request.query_params.get("days", str(DEFAULT_DAYS))
    svc = services(request)
    try:
        days = plain_int(days_text, max_digits=4)
        if days is None:
            raise BadRequest("days must be a whole number of days")
        found = await run_in_threadpool(svc.usage.module_usage, *names, versions, days)
    except NotFound:
        return not_found_page(request, viewer)
    except BadRequest as exc:
        return error_page(request, viewer, 400, "Bad request", str(exc))
    context = {
        "title": f"Usage of {found.module}",
        "u": found,
        "module_path": "/modules/" + "/".join(quote(n, safe="") for n in names),
        "names": found.module.split("/"),
    }
    body = render(request, viewer, "usage.html", context)
    return html_response(body, headers=NO_STORE)

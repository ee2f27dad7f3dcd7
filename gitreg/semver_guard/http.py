"""`GET /v1/modules/:namespace/:name/:system/:version/changes?from=OTHER`.

The classified diff between two versions of a module (gitreg/semver_guard/diff.py):
`from` defaults to the version before it. A version the guard refused
(`enforce`) is not published but answers with the diff it was refused for.
A private namespace answers as the browse API does (401 anonymously, 404 with
a token for another namespace), before the module is looked up.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.api.credentials import credentials
from gitreg.api.responses import json_response
from gitreg.api.services import services
from gitreg.canonical_json import json_bytes
from gitreg.errors import BadRequest

PATH = "/v1/modules/{namespace}/{name}/{system}/{version}/changes"
HEADERS = {"Cache-Control": "private, no-cache", "Vary": "Authorization"}


async def changes(request: Request) -> Response:
    svc = services(request)
    p = request.path_params
    names = (p["namespace"], p["name"], p["system"])
    base = request.query_params.get("from") or None
    if base is not None and len(base) > 128:
        raise BadRequest("from is not a version")
    not_found = f"module {'/'.join(names)} {p['version']} not found"
    await svc.access.require_read(credentials(request), p["namespace"], not_found)
    found = await run_in_threadpool(svc.semver.changes, names, p["version"], base)
    return json_response(json_bytes(found.as_json()), headers=HEADERS)


def routes() -> list[Route]:
    """Before the browse API's routes: its `/{version}` paths end earlier, but
    every route that names a version's own path is kept together."""
    return [Route(PATH, changes, methods=["GET"])]

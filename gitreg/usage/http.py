"""`GET /v1/modules/:namespace/:name/:system/usage?versions=1&days=30`.

Who downloaded which versions of a module in the last days, per version, per
person and per team (gitreg/usage/service.py). The answer names people, so it
needs a token with `publish` (or `admin`) on the module's namespace, whether the
namespace is public or private: without a token 401, with any other token 403,
and that before the module is looked up, so the 403 is the same for a module
that does not exist and tells nothing about private namespaces. Only a caller
allowed to see the answer can get a 404. It is never cached in a shared cache
(`Cache-Control: private, no-store`): it changes with every flush of the counts
and differs per reader.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.api.credentials import credentials
from gitreg.api.responses import json_response
from gitreg.api.services import services
from gitreg.auth.tokens import Scope
from gitreg.canonical_json import json_bytes
from gitreg.errors import BadRequest
from gitreg.usage.service import DEFAULT_DAYS

PATH = "/v1/modules/{namespace}/{name}/{system}/usage"
NO_STORE = {"Cache-Control": "private, no-store", "Vary": "Authorization"}


def _days(text: str | None) -> int:
    if text is None:
        return DEFAULT_DAYS
    if not text.isascii() or not text.isdigit() or len(text) > 4:
        raise BadRequest(f"days must be a whole number of days, not {text[:20]!r}")
    return int(text)


async def usage(request: Request) -> Response:
    svc = services(request)
    p = request.path_params
    await svc.access.require(credentials(request), Scope.publish, p["namespace"])
    versions = request.query_params.get("versions", "")
    days = _days(request.query_params.get("days"))
    found = await run_in_threadpool(
        svc.usage.module_usage, p["namespace"], p["name"], p["system"], versions, days
    )
    return json_response(json_bytes(found.to_json()), headers=NO_STORE)


def routes() -> list[Route]:
    """Before the browse API's routes: its `/{version}` would take `usage`."""
    return [Route(PATH, usage, methods=["GET"])]

"""Remote service discovery (spec: remote-service-discovery.md).

`GET /.well-known/terraform.json` answers 200 `application/json` mapping
service identifiers to base URLs; relative URLs resolve against the document,
so the answer is the same bytes for every host name and is built once.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.api.responses import CachedJson

SERVICES: Mapping[str, object] = {
    "modules.v1": "/v1/modules/",
    "providers.v1": "/v1/providers/",
    # Signed statements, their keys and the transparency log (docs/verify.md).
    "attestations.v1": "/v1/attestations/",
}


def routes(services: Mapping[str, object] = SERVICES) -> list[Route]:
    document = CachedJson.of(dict(services))

    async def discovery(request: Request) -> Response:
        return document.response(request)

    return [Route("/.well-known/terraform.json", discovery, methods=["GET"])]

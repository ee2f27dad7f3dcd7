"""Provider network mirror protocol (spec: provider-network-mirror-protocol.md).

Base URL `https://HOST/mirror/`, so the CLI configuration is

    provider_installation { network_mirror { url = "https://HOST/mirror/" } }

    GET /mirror/:hostname/:namespace/:type/index.json      {"versions": {...}}
    GET /mirror/:hostname/:namespace/:type/:version.json   {"archives": {...}}
    GET|HEAD /mirror/:hostname/:namespace/:type/terraform-provider-TYPE_V_OS_ARCH.zip

JSON is `application/json` (Terraform requires it, TERRAFORM-CLIENT.md) with an
ETag, and a matching If-None-Match gets 304 (checklist H2). Archive URLs in
VERSION.json are relative file names, resolved by Terraform against the
VERSION.json URL, so zips are served by gitreg beside the JSON with the blob
helper (immutable, ETag = sha256). Providers published to gitreg appear under
gitreg's own hostnames; every namespace, hosted or mirrored, obeys namespace
privacy (issue 6): Terraform sends no credentials for the zips, so a private
namespace's zip URLs are signed.
"""

from __future__ import annotations

import hashlib

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.addresses import ProviderAddress, provider_address
from gitreg.api.blobs import blob_response
from gitreg.api.credentials import credentials
from gitreg.api.responses import json_response
from gitreg.api.services import services
from gitreg.errors import NotFound
from gitreg.mirror.downloads import version_json
from gitreg.mirror.http_stream import fill_response

PREFIX = "/mirror"


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _json(request: Request, body: bytes) -> Response:
    etag = _etag(body)
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return json_response(body, headers=headers)


async def mirror_file(request: Request) -> Response:
    params = request.path_params
    address: ProviderAddress = provider_address(
        params["hostname"], params["namespace"], params["type"]
    )
    svc = services(request)
    mirror = svc.mirror
    # Hosted and upstream providers alike follow namespace visibility: with
    # `read_default = "token"` a locked-down registry serves nothing, mirrored
    # public providers included, without a read token (unless the operator
    # marks such a namespace public with `gitreg namespace set NS --public`).
    name: str = params["file"]
    if name.endswith(".zip") and "signature" in request.query_params:
        # Terraform fetches zips without credentials: the signed URL that
        # VERSION.json handed out is the proof instead of a token (U2).
        svc.access.verify_signature(credentials(request))
        private = True
    else:
        private = await svc.access.require_read(
            credentials(request), address.namespace, f"provider {address} not found"
        )
    if name == "index.json":
        return _json(request, await mirror.index_json(address))
    if name.endswith(".json"):
        directory = request.url.path.rsplit("/", 1)[0]
        version = name[: -len(".json")]
        body = await version_json(mirror, svc.access.signer, address, version, directory, private)
        # Signed URLs expire, so a signed body is never cached or given an old ETag.
        return json_response(body) if private else _json(request, body)
    if name.endswith(".zip"):
        if request.method == "HEAD":  # the true Content-Length: only once it is here
            sha256 = await mirror.archive_sha256(address, name)
            return await blob_response(request, sha256, "application/zip")
        found = await mirror.archive(address, name)
        if isinstance(found, str):
            return await blob_response(request, found, "application/zip")
        return await fill_response(request, found, private)  # a cold miss, sent as it arrives
    raise NotFound(f"no such mirror file {name[:120]!r}")


def routes() -> list[Route]:
    return [
        Route(
            PREFIX + "/{hostname}/{namespace}/{type}/{file}", mirror_file, methods=["GET", "HEAD"]
        )
    ]

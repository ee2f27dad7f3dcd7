"""Provider network mirror protocol (spec: provider-network-mirror-protocol.md).

Base URL `https://HOST/mirror/`, so the CLI configuration is

    provider_installation { network_mirror { url = "https://HOST/mirror/" } }

    GET /mirror/:hostname/:namespace/:type/index.json      {"versions": {...}}
    GET /mirror/:hostname/:namespace/:type/:version.json   {"archives": {...}}
    GET|HEAD /mirror/:hostname/:namespace/:type/terraform-provider-TYPE_V_OS_ARCH.zip

JSON is `application/json` (Terraform requires it, TERRAFORM-CLIENT.md) with an
ETag, and a matching If-None-Match gets 304. Archive URLs in
VERSION.json are relative file names, resolved by Terraform against the
VERSION.json URL, so zips are served by gitreg beside the JSON with the blob
helper (immutable, ETag = sha256). Providers published to gitreg appear under
gitreg's own hostnames; every namespace, hosted or mirrored, obeys namespace
privacy: Terraform sends no credentials for the zips, so a private
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
from gitreg.mirror.downloads import JsonFile, StoredZip
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
    found = await services(request).mirror.file(
        credentials(request),
        address,
        params["file"],
        request.url.path.rsplit("/", 1)[0],
        request.method == "HEAD",
    )
    if isinstance(found, JsonFile):
        return _json(request, found.body) if found.revalidate else json_response(found.body)
    if isinstance(found, StoredZip):
        return await blob_response(request, found.sha256, "application/zip")
    return await fill_response(request, found.fill, found.private)  # sent as it arrives


def routes() -> list[Route]:
    return [
        Route(
            PREFIX + "/{hostname}/{namespace}/{type}/{file}", mirror_file, methods=["GET", "HEAD"]
        )
    ]

"""Provider registry protocol, `providers.v1` (spec: provider-registry-protocol.md),
the files it points at, and CI uploads.

    GET      /v1/providers/:namespace/:type/versions
    GET      /v1/providers/:namespace/:type/:version/download/:os/:arch
    GET|HEAD /v1/providers/:namespace/:type/:version/files/:filename
    POST     /api/v1/providers/:namespace/:type/:version/uploads
    PUT      /api/v1/providers/:namespace/:type/:version/uploads/:id/:filename
    POST     /api/v1/providers/:namespace/:type/:version/uploads/:id/publish

Metadata answers come from the metadata cache (no database work, and never a
write, on a hit). Download answers are decided in `gitreg.providers.downloads`
(absolute URLs, signed for a private namespace); this module only
supplies the base URL, built like module download locations from `public_url`
when set. Files are immutable: ETag and `immutable` caching, true
Content-Length on HEAD.
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.addresses import ProviderAddress, local_provider_address
from gitreg.api.blobs import blob_response
from gitreg.api.credentials import credentials
from gitreg.api.responses import CachedJson, json_response
from gitreg.api.services import services
from gitreg.api.urls import base_url
from gitreg.canonical_json import json_bytes
from gitreg.errors import BadRequest, PayloadTooLarge
from gitreg.numbers import declared_length
from gitreg.providers.downloads import PREFIX
from gitreg.providers.names import check_version
from gitreg.usage.http_counting import count_provider_download

UPLOADS = "/api/v1/providers"
MAX_PUBLISH_BODY = 4096


def _address(request: Request) -> ProviderAddress:
    p = request.path_params
    return local_provider_address(p["namespace"], p["type"])


def _version(request: Request) -> str:
    return check_version(request.path_params["version"])


# -- versions -----------------------------------------------------------------


async def versions(request: Request) -> Response:
    svc = services(request)
    body = await svc.providers.versions(credentials(request), _address(request), CachedJson.of)
    return body.response(request)


# -- download -----------------------------------------------------------------


async def download(request: Request) -> Response:
    p = request.path_params
    svc = services(request)
    body = await svc.providers.download(
        credentials(request),
        p["namespace"],
        p["type"],
        p["version"],
        p["os"],
        p["arch"],
        base_url(request, svc.settings),
    )
    count_provider_download(request, svc)
    return json_response(body)


# -- files --------------------------------------------------------------------


def _media_type(filename: str) -> str:
    if filename.endswith(".zip"):
        return "application/zip"
    if filename.endswith(".sig"):
        return "application/pgp-signature"
    return "text/plain; charset=utf-8"


async def file(request: Request) -> Response:
    filename = request.path_params["filename"]
    sha256 = await services(request).providers.file(_address(request), _version(request), filename)
    # Private namespaces' files need the signed URL the download answer gave.
    return await blob_response(request, sha256, _media_type(filename))


# -- uploads ------------------------------------------------------------------


async def create_upload(request: Request) -> Response:
    address = _address(request)
    version = _version(request)
    svc = services(request)
    upload_id = await svc.providers.create_upload(credentials(request), address, version)
    base = base_url(request, svc.settings)
    location = f"{UPLOADS}/{address.namespace}/{address.type}/{version}/uploads/{upload_id}"
    return json_response(
        json_bytes({"upload_id": upload_id, "url": base + location}),
        status=201,
        headers={"Location": base + location},
    )


async def put_file(request: Request) -> Response:
    filename = request.path_params["filename"]
    size = await services(request).providers.receive_file(
        credentials(request),
        _address(request),
        _version(request),
        request.path_params["upload_id"],
        filename,
        declared_length(request.headers.get("content-length", "")),
        request.stream(),
    )
    return json_response(json_bytes({"filename": filename, "size": size}), status=201)


async def _publish_options(request: Request) -> bool:
    body = b""
    async for chunk in request.stream():  # cut off at the cap, never read whole
        body += chunk
        if len(body) > MAX_PUBLISH_BODY:
            raise PayloadTooLarge("publish options are over 4 KiB")
    if not body.strip():
        return False
    try:
        options = json.loads(body)
    except ValueError as exc:
        raise BadRequest('publish body must be JSON such as {"sign": true}') from exc
    if not isinstance(options, dict) or not isinstance(options.get("sign", False), bool):
        raise BadRequest('publish body must be JSON such as {"sign": true}')
    return bool(options.get("sign", False))


async def publish_upload(request: Request) -> Response:
    published = await services(request).providers.publish_upload(
        credentials(request),
        _address(request),
        _version(request),
        request.path_params["upload_id"],
        lambda: _publish_options(request),
    )
    status = 201 if published.status == "published" else 200
    return json_response(json_bytes(published.to_json()), status=status)


def routes() -> list[Route]:
    one = PREFIX + "/{namespace}/{type}"
    up = UPLOADS + "/{namespace}/{type}/{version}/uploads"
    return [
        Route(one + "/versions", versions, methods=["GET"]),
        Route(one + "/{version}/download/{os}/{arch}", download, methods=["GET"]),
        Route(one + "/{version}/files/{filename}", file, methods=["GET", "HEAD"]),
        Route(up, create_upload, methods=["POST"]),
        Route(up + "/{upload_id}/publish", publish_upload, methods=["POST"]),
        Route(up + "/{upload_id}/{filename}", put_file, methods=["PUT"]),
    ]

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
(absolute URLs, signed for a private namespace: checklist U2); this module only
supplies the base URL, built like module download locations from `public_url`
when set. Files are immutable: ETag and `immutable` caching, true
Content-Length on HEAD (H2).
"""

from __future__ import annotations

import json

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.addresses import ProviderAddress, local_provider_address
from gitreg.api.blobs import blob_response
from gitreg.api.credentials import credentials
from gitreg.api.responses import CachedJson, json_response
from gitreg.api.services import services
from gitreg.api.urls import base_url
from gitreg.auth.tokens import Scope
from gitreg.canonical_json import json_bytes
from gitreg.errors import BadRequest, NotFound, PayloadTooLarge
from gitreg.numbers import declared_length
from gitreg.providers.collect import collect
from gitreg.providers.downloads import PREFIX, ProviderDownloads
from gitreg.providers.names import MAX_FILENAME, check_version
from gitreg.providers.record import Published
from gitreg.providers.service import ProviderPublisher
from gitreg.providers.store import ProviderIndex
from gitreg.providers.uploads import UploadStaging
from gitreg.services import Services
from gitreg.usage.http_counting import count_provider_download
from gitreg.versions import sort_key

UPLOADS = "/api/v1/providers"
MAX_PUBLISH_BODY = 4096


def _address(request: Request) -> ProviderAddress:
    p = request.path_params
    return local_provider_address(p["namespace"], p["type"])


def _version(request: Request) -> str:
    return check_version(request.path_params["version"])


# -- versions -----------------------------------------------------------------


def _versions_body(store: ProviderIndex, address: ProviderAddress) -> CachedJson | None:
    provider = store.find_provider(address.key)
    if provider is None:
        return None
    packages = store.packages_by_version(provider.id)
    listed = []
    for version in sorted(store.provider_versions(provider.id), key=lambda v: sort_key(v.version)):
        if version.yanked:  # still downloadable by exact version (docs/providers.md)
            continue
        listed.append(
            {
                "version": version.version,
                "protocols": list(version.protocols),
                "platforms": [{"os": p.os, "arch": p.arch} for p in packages.get(version.id, [])],
            }
        )
    return CachedJson.of({"versions": listed})


async def versions(request: Request) -> Response:
    address = _address(request)
    svc = services(request)
    await svc.access.require_read(
        credentials(request), address.namespace, f"provider {address} not found"
    )
    body = await svc.cache.get(
        ("provider-versions", address.key), lambda: _versions_body(svc.providers.store, address)
    )
    if body is None:
        raise NotFound(f"provider {address} not found")
    assert isinstance(body, CachedJson)
    return body.response(request)


# -- download -----------------------------------------------------------------


async def download(request: Request) -> Response:
    p = request.path_params
    svc = services(request)
    downloads = ProviderDownloads(svc.providers.store, svc.cache, svc.access)
    body = await downloads.answer(
        p["namespace"],
        p["type"],
        p["version"],
        p["os"],
        p["arch"],
        base_url(request, svc.settings),
        lambda: svc.access.principal(credentials(request)),
    )
    count_provider_download(request, svc)
    return json_response(body)


# -- files --------------------------------------------------------------------


def _files(store: ProviderIndex, address: ProviderAddress, version: str) -> dict[str, str]:
    """filename -> blob sha256 for one version's served files."""
    provider = store.find_provider(address.key)
    found = store.provider_version(provider.id, version) if provider else None
    if found is None:
        return {}
    files = {p.filename: p.sha256 for p in store.packages(found.id)}
    files[found.shasums_filename] = found.shasums_sha256
    files[found.shasums_filename + ".sig"] = found.signature_sha256
    return files


def _media_type(filename: str) -> str:
    if filename.endswith(".zip"):
        return "application/zip"
    if filename.endswith(".sig"):
        return "application/pgp-signature"
    return "text/plain; charset=utf-8"


async def file(request: Request) -> Response:
    address = _address(request)
    version = _version(request)
    filename = request.path_params["filename"]
    svc = services(request)
    files = await svc.cache.get(
        ("provider-files", address.key, version),
        lambda: _files(svc.providers.store, address, version),
    )
    assert isinstance(files, dict)
    sha256 = files.get(filename)
    if sha256 is None:
        raise NotFound(f"provider {address} {version} has no file {filename[:120]!r}")
    # Private namespaces' files need the signed URL the download answer gave (U2).
    return await blob_response(request, sha256, _media_type(filename))


# -- uploads ------------------------------------------------------------------


def _staging(svc: Services) -> UploadStaging:
    return UploadStaging.for_settings(svc.uploads, svc.staged_bytes, svc.settings)


async def create_upload(request: Request) -> Response:
    address = _address(request)
    version = _version(request)
    svc = services(request)
    principal = await svc.access.require(credentials(request), Scope.publish, address.namespace)
    upload_id = await run_in_threadpool(_staging(svc).create, address, version, principal.token_id)
    base = base_url(request, svc.settings)
    location = f"{UPLOADS}/{address.namespace}/{address.type}/{version}/uploads/{upload_id}"
    return json_response(
        json_bytes({"upload_id": upload_id, "url": base + location}),
        status=201,
        headers={"Location": base + location},
    )


async def put_file(request: Request) -> Response:
    address = _address(request)
    version = _version(request)
    filename = request.path_params["filename"]
    svc = services(request)
    await svc.access.require(credentials(request), Scope.publish, address.namespace)
    if len(filename) > MAX_FILENAME:
        raise BadRequest("file name too long")
    staging = _staging(svc)
    upload = await run_in_threadpool(
        staging.open, request.path_params["upload_id"], address, version
    )
    cap = await run_in_threadpool(
        staging.check_file,
        upload,
        filename,
        address.type,
        version,
        svc.settings.max_provider_package_bytes,
    )
    declared = declared_length(request.headers.get("content-length", ""))
    if declared is not None and declared > cap:
        raise PayloadTooLarge(f"{filename} is over the {cap}-byte limit")
    # Staging quotas: the declared bytes are reserved before a byte is read, and
    # more as they arrive, so a client that lies is cut off at the quota.
    reservation = await run_in_threadpool(staging.reserve, upload, filename, declared or 0, cap)
    incoming = None
    size = 0
    try:
        incoming = await run_in_threadpool(staging.receive, upload, filename)
        async for chunk in request.stream():
            size += len(chunk)
            if size > cap:
                raise PayloadTooLarge(f"{filename} is over the {cap}-byte limit")
            await run_in_threadpool(staging.write, incoming, reservation, chunk, size)
    except BaseException:
        with anyio.CancelScope(shield=True):  # a client gone still releases its bytes
            await run_in_threadpool(staging.abort, incoming, reservation)
        raise
    await run_in_threadpool(staging.commit, incoming, reservation, size)
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


def _publish_upload(
    publisher: ProviderPublisher,
    staging: UploadStaging,
    address: ProviderAddress,
    version: str,
    upload_id: str,
    sign: bool,
) -> Published:
    upload = staging.open(upload_id, address, version)
    try:
        # Local paths: the upload's own directory, or a scratch copy of its
        # files when they live in S3.
        with staging.local_files(upload) as paths:
            files = collect(paths, address.type, version, strict=True)
            provider = publisher.store.add_provider(address.namespace, address.type)
            return publisher.publish(provider, version, files, sign=sign, source="upload")
    finally:
        staging.remove(upload)


async def publish_upload(request: Request) -> Response:
    address = _address(request)
    version = _version(request)
    svc = services(request)
    await svc.access.require(credentials(request), Scope.publish, address.namespace)
    sign = await _publish_options(request)
    published = await run_in_threadpool(
        _publish_upload,
        svc.providers,
        _staging(svc),
        address,
        version,
        request.path_params["upload_id"],
        sign,
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

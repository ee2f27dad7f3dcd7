"""Content-addressed downloads: `GET|HEAD /archives/:sha256.tar.gz`.

The bytes never change for a name, so the answer carries the sha256 as ETag and
`Cache-Control: immutable`. Every route that serves blob bytes
goes through `blob_response`, so each applies the same access decision: a blob
owned only by private namespaces (module archive, provider file, mirror zip)
needs a current signed URL or a read token for an owning namespace, and is
`private, no-store`, since its signed URLs expire. HEAD answers with the true
Content-Length: Terraform's getter sends HEAD twice before the GET and would
skip the GET on a zero length.

A store without local files (S3) is streamed through gitreg with the
Content-Length its `stat()` gives, or, with `blob_downloads = "redirect"`,
answered by a 302 to a presigned URL. The URL a client was given stays this
gitreg URL either way (update bots cache hashes by URL). If the store fails in
the middle of a body, the iterator logs it once (with its traceback) and raises
ResponseCut after the headers went out: uvicorn then closes the connection short
of the Content-Length, so no client can take a cut-off archive for a whole one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from typing import BinaryIO

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from gitreg.api.blob_file import BlobFileResponse, OpenBlob
from gitreg.api.credentials import credentials
from gitreg.api.services import services
from gitreg.errors import NotFound, ResponseCut, StorageUnavailable
from gitreg.metrics import service as metrics
from gitreg.services import Services
from gitreg.storage.blobs import SHA256_RE

IMMUTABLE = "public, max-age=31536000, immutable"
# A private blob is served through a signed URL that expires; a shared
# cache keeping it "public, immutable" would serve it past the expiry.
PRIVATE = "private, no-store"
# A store off this machine is read through a buffered stream on a worker thread:
# large reads keep a download to a few hundred thread-pool trips.
REMOTE_PIECE = 1024 * 1024

log = logging.getLogger("gitreg.blobs")


async def blob_response(request: Request, sha256: str, media_type: str) -> Response:
    if not SHA256_RE.match(sha256):
        raise NotFound("no such archive")
    svc = services(request)
    private = await svc.access.check_blob(credentials(request), sha256)
    return await stored_blob(request, sha256, media_type, private)


async def stored_blob(
    request: Request,
    sha256: str,
    media_type: str,
    private: bool,
    extra: dict[str, str] | None = None,
) -> Response:
    """The stored bytes of a blob whose access the caller has decided (a route
    that advertises blobs by another rule, such as an OCI repository's), with
    `extra` headers on every answer but a redirect."""
    svc = services(request)
    path = svc.blobs.local_file(sha256)
    headers = {"ETag": f'"{sha256}"', "Cache-Control": PRIVATE if private else IMMUTABLE}
    headers.update(extra or {})
    if path is None:
        return await _remote_blob(request, svc, sha256, media_type, headers)
    blob = OpenBlob(os.fspath(path))
    try:
        return await _local_blob(request, blob, sha256, media_type, headers)
    except BaseException:
        blob.close()  # whatever failed before the response took the descriptor
        raise


async def _local_blob(
    request: Request, blob: OpenBlob, sha256: str, media_type: str, headers: dict[str, str]
) -> Response:
    """A blob file on this machine: opened and fstat'ed in one thread-pool trip
    (gitreg/api/blob_file.py), and that descriptor handed to the response."""
    try:
        stat = await blob.open()
    except FileNotFoundError as exc:
        raise NotFound("no such archive") from exc
    except OSError as exc:
        # Before any byte went out (out of descriptors, a disk error): a retry may
        # succeed, so 503 with Retry-After rather than a 500.
        raise StorageUnavailable(f"cannot open blob {sha256}: {exc.strerror}") from exc
    if request.headers.get("if-none-match") == headers["ETag"]:
        blob.close()
        return Response(status_code=304, headers=headers)
    if request.method == "GET":  # the whole blob, counted as the answer starts
        metrics.blob_served(stat.st_size)
    return BlobFileResponse(blob, stat, media_type=media_type, headers=headers)


async def _remote_blob(
    request: Request, svc: Services, sha256: str, media_type: str, headers: dict[str, str]
) -> Response:
    """A blob kept off this machine: HEAD and 304 from `stat()`, GET streamed or
    redirected. `stat()` first, so a missing blob is a 404 and an unreachable
    store a 503 before any status line is sent."""
    try:
        size = (await run_in_threadpool(svc.blobs.stat, sha256)).size
    except NotFound as exc:
        raise NotFound("no such archive") from exc
    if request.headers.get("if-none-match") == headers["ETag"]:
        return Response(status_code=304, headers=headers)
    if request.method == "HEAD":
        # Answered here even in redirect mode: a presigned URL is signed for GET.
        headers["Content-Length"] = str(size)
        return Response(status_code=200, media_type=media_type, headers=headers)
    if svc.settings.blob_downloads == "redirect":
        ttl = svc.settings.signed_url_ttl
        url = await run_in_threadpool(svc.blobs.presigned_url, sha256, ttl)
        if url is not None:
            # The target expires, so neither the 302 nor its Location may be cached.
            return RedirectResponse(url, 302, headers={"Cache-Control": PRIVATE})
    source = await run_in_threadpool(svc.blobs.open, sha256)
    headers["Content-Length"] = str(size)
    metrics.blob_served(size)
    return StreamingResponse(_chunks(source, sha256, size), media_type=media_type, headers=headers)


async def _chunks(source: BinaryIO, sha256: str, size: int) -> AsyncIterator[bytes]:
    """The blob in 1 MiB pieces, read off the event loop. A store failure comes
    after the headers: it is logged here, once, and ResponseCut aborts the
    connection (see the module docstring) without a second traceback from the
    app or uvicorn (gitreg/app.py, gitreg/logs.py)."""
    sent = 0
    try:
        while True:
            try:
                chunk = await run_in_threadpool(source.read, REMOTE_PIECE)
            except Exception as exc:
                log.error(
                    "cut off blob %s after %d of %d bytes: the blob store failed",
                    sha256,
                    sent,
                    size,
                    exc_info=True,
                )
                raise ResponseCut(sha256) from exc
            if not chunk:
                return
            sent += len(chunk)
            yield chunk
    finally:
        # A client that went away cancels this mid-read; closing waits for that
        # read's thread to finish with the file, off the event loop, shielded.
        with anyio.CancelScope(shield=True):
            await run_in_threadpool(source.close)


async def module_archive(request: Request) -> Response:
    return await blob_response(request, request.path_params["sha256"], "application/gzip")


def routes() -> list[Route]:
    return [Route("/archives/{sha256}.tar.gz", module_archive, methods=["GET", "HEAD"])]

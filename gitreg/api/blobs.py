"""Content-addressed downloads: `GET|HEAD /archives/:sha256.tar.gz`.

The bytes never change for a name, so the answer carries the sha256 as ETag and
`Cache-Control: immutable` (checklist H2). Every route that serves blob bytes
goes through `blob_response`, so each applies the same access decision: a blob
owned only by private namespaces (module archive, provider file, mirror zip)
needs a current signed URL or a read token for an owning namespace, and is
`private, no-store`, since its signed URLs expire (U2). HEAD answers with the true
Content-Length: Terraform's getter sends HEAD twice before the GET and would
skip the GET on a zero length.
"""

from __future__ import annotations

import os

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from gitreg.errors import NotFound
from gitreg.services import services
from gitreg.storage.blobs import SHA256_RE

IMMUTABLE = "public, max-age=31536000, immutable"
# A private blob is served through a signed URL that expires (U2); a shared
# cache keeping it "public, immutable" would serve it past the expiry.
PRIVATE = "private, no-store"


class BlobFileResponse(FileResponse):
    # Large reads keep a multi-megabyte download to a few hundred event-loop turns.
    chunk_size = 1024 * 1024


async def blob_response(request: Request, sha256: str, media_type: str) -> Response:
    if not SHA256_RE.match(sha256):
        raise NotFound("no such archive")
    svc = services(request)
    private = await svc.access.check_blob(request, sha256)
    path = svc.blobs.local_file(sha256)
    if path is None:
        raise NotImplementedError("serving a blob store without local files")
    try:
        stat = await run_in_threadpool(os.stat, path)
    except FileNotFoundError as exc:
        raise NotFound("no such archive") from exc
    etag = f'"{sha256}"'
    headers = {"ETag": etag, "Cache-Control": PRIVATE if private else IMMUTABLE}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return BlobFileResponse(path, media_type=media_type, headers=headers, stat_result=stat)


async def module_archive(request: Request) -> Response:
    return await blob_response(request, request.path_params["sha256"], "application/gzip")


def routes() -> list[Route]:
    return [Route("/archives/{sha256}.tar.gz", module_archive, methods=["GET", "HEAD"])]

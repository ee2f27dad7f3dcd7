"""A mirror zip on a cold miss, sent while it arrives from the upstream (the rules
are gitreg/mirror/fill.py's).

The status line goes out once SHA256SUMS and its signature verified, with the
upstream's Content-Length and the expected sha256 as ETag. The body is read from
the blob writer's temp file in 64 KiB pieces (from the page cache on the loop,
as hosted blobs are: gitreg/api/blob_file.py), up to what the fill allows. If a
check fails at the end, the iterator raises before the held-back tail: the
server then closes the connection short of the Content-Length (as for a store
failure in gitreg/api/blobs.py), and the client sees a truncated body.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from gitreg.api.blob_file import PIECE, PageCacheFile
from gitreg.api.blobs import IMMUTABLE, PRIVATE, blob_response
from gitreg.errors import GitregError, ResponseCut
from gitreg.metrics import service as metrics
from gitreg.mirror.fill import PackageFill

log = logging.getLogger("gitreg.mirror")


async def fill_response(request: Request, fill: PackageFill, private: bool) -> Response:
    # A failure before the first byte (signature, SHA256SUMS, upstream status)
    # raises here and is answered as JSON like any other error.
    await fill.ready()
    fd = fill.open_reader()
    if fd is None:  # it ended meanwhile: stored, and served as a warm hit
        package = await fill.result()
        return await blob_response(request, package.sha256, "application/zip")
    # The same headers as the warm hit will carry (ETag = the zip's sha256).
    headers = {"ETag": f'"{fill.expected}"', "Cache-Control": PRIVATE if private else IMMUTABLE}
    if fill.size is not None:
        headers["Content-Length"] = str(fill.size)
        metrics.blob_served(fill.size)
    pieces = _pieces(fill, fd, request.url.path.removeprefix("/mirror/"))
    return StreamingResponse(pieces, media_type="application/zip", headers=headers)


async def _pieces(fill: PackageFill, fd: int, name: str) -> AsyncIterator[memoryview]:
    file = PageCacheFile(fd, name)
    offset = 0
    try:
        # While this reader streams, the fill's failure is its to report (the
        # warning below), and the mirror service does not log it a second time.
        with fill.reading():
            while True:
                try:
                    end = await fill.servable(offset)
                except GitregError as exc:
                    # One line naming the package and the reason; ResponseCut only makes
                    # the server close the connection short of the Content-Length (no
                    # traceback: gitreg/app.py and gitreg/logs.py leave it unlogged).
                    total = "?" if fill.size is None else str(fill.size)
                    log.warning(
                        "cut off %s after %d of %s bytes sent while it arrived: %s",
                        name,
                        offset,
                        total,
                        exc,
                    )
                    raise ResponseCut(name) from exc
                if end <= offset:
                    return  # verified and stored: every byte was sent
                while offset < end:
                    piece = await file.read(min(PIECE, end - offset))
                    if not piece:
                        raise OSError(f"the temp file of a fill ended at {offset} of {end} bytes")
                    offset += len(piece)
                    yield memoryview(piece)  # a bytearray: Starlette sends bytes and memoryviews
    finally:
        # A client that went away cancels this: closing its descriptor is all it
        # owns; the fill goes on for the others.
        with anyio.CancelScope(shield=True):
            await file.aclose()

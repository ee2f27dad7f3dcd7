"""`BlobFileResponse`: a blob file sent in small pieces, read on the event loop
when the page cache has them.

Memory (issue 16, target 2): every piece handed to the server is held, while it
is sent, as plaintext, as TLS records in OpenSSL's memory BIO and as the copy
queued on the socket, and the BIO keeps its largest size for the connection's
life. With Starlette's file reads of 1 MiB, 8 concurrent archive downloads over
TLS took one worker from 66 to 105 MiB; with 64 KiB pieces from 50 to 58 MiB
(docs/performance.md, "Memory of one worker (issue 16, target 2)").

Small pieces cost event-loop turns instead: a thread-pool trip per piece (about
50 us) would cost more than the send. So a piece is read with `preadv2(...,
RWF_NOWAIT)`, which copies from the page cache and never waits for the disk
(Linux 4.14+), and only what is not cached is read on a worker thread, as
Starlette does.

A read that fails after the headers went out (a disk error) is logged once, here,
and raised as ResponseCut: the server closes the connection short of the
Content-Length without a second and third traceback (gitreg/app.py, gitreg/logs.py).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import AsyncIterator
from typing import Any, cast

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.responses import FileResponse

from gitreg.errors import ResponseCut

# 0 where the platform has no non-blocking file read (macOS): every piece is
# then read on a worker thread.
_NOWAIT: int = getattr(os, "RWF_NOWAIT", 0)
_nowait = [_NOWAIT]
# What a kernel or file system without non-blocking reads answers RWF_NOWAIT with.
_UNSUPPORTED = {errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS}
PIECE = 64 * 1024

log = logging.getLogger("gitreg.blobs")


def _read_blocking(fd: int, buffer: bytearray, offset: int, start: int) -> int:
    """Fill `buffer[start:]` from `offset + start`; the bytes now in it (short only at EOF)."""
    view = memoryview(buffer)
    while start < len(buffer):
        got = os.preadv(fd, [view[start:]], offset + start)
        if got == 0:
            break
        start += got
    return start


class PageCacheFile:
    """The part of anyio's AsyncFile that FileResponse uses: read, seek, aclose."""

    def __init__(self, fd: int, name: str = "a file", size: int | None = None) -> None:
        self.fd = fd
        self.name = name  # for the log line of a failed read
        self.offset = 0
        # The file's size when known (blobs never change): the last piece is then
        # not followed by a thread-pool trip that only finds the end of the file,
        # which for an archive under one piece (most modules) was its only read.
        self.size = size

    async def seek(self, offset: int) -> None:
        self.offset = offset

    async def read(self, size: int) -> bytes:
        try:
            return await self._read(size)
        except OSError as exc:
            log.error(
                "cut off %s at byte %d: reading it failed", self.name, self.offset, exc_info=True
            )
            raise ResponseCut(self.name) from exc

    async def _read(self, size: int) -> bytes:
        if self.size is not None:
            size = max(0, min(size, self.size - self.offset))
        # A fresh buffer per piece: the transport may still hold the last one.
        buffer = bytearray(size)
        got = 0
        if _nowait[0]:
            try:
                got = os.preadv(self.fd, [buffer], self.offset, _nowait[0])
            except BlockingIOError:  # nothing of it cached
                got = 0
            except OSError as exc:
                if exc.errno not in _UNSUPPORTED:
                    raise
                _nowait[0] = 0  # this kernel or file system has no RWF_NOWAIT: threads only
                got = 0
        if got < size:  # not cached (or EOF, size unknown): the rest off the event loop
            got = await run_in_threadpool(_read_blocking, self.fd, buffer, self.offset, got)
            del buffer[got:]
        self.offset += got
        # bytes in all but name: nothing writes to it after this.
        return cast(bytes, buffer)

    async def aclose(self) -> None:
        os.close(self.fd)


class BlobFileResponse(FileResponse):
    chunk_size = PIECE

    @contextlib.asynccontextmanager
    async def _open_file(self) -> AsyncIterator[Any]:
        fd = await run_in_threadpool(os.open, self.path, os.O_RDONLY | os.O_CLOEXEC)
        size = None if self.stat_result is None else self.stat_result.st_size
        file = PageCacheFile(fd, os.fspath(self.path), size)
        try:
            yield file
        finally:
            with anyio.CancelScope(shield=True):
                await file.aclose()

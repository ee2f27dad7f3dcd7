"""`BlobFileResponse`: a blob file sent in small pieces, read on the event loop
when the page cache has them.

Memory: every piece handed to the server is held, while it is sent, as
plaintext, as TLS records in OpenSSL's memory BIO and as the copy queued on the
socket, and the BIO keeps its largest size for the connection's life, so pieces
of 1 MiB (Starlette's file reads) cost a worker several times what 64 KiB
pieces do (docs/performance.md, "Memory of one worker").

Small pieces cost event-loop turns instead: a thread-pool trip per piece would
cost more than the send. So a piece is read with `preadv2(...,
RWF_NOWAIT)`, which copies from the page cache and never waits for the disk
(Linux 4.14+), and only what is not cached is read on a worker thread, as
Starlette does.

A read that fails after the headers went out (a disk error) is logged once, here,
and raised as ResponseCut: the server closes the connection short of the
Content-Length without a second and third traceback (gitreg/app.py, gitreg/logs.py).

A hosted blob is opened and fstat'ed in one worker-thread trip (`OpenBlob`), and
the response reads that descriptor: a second trip to open the file after a stat
would be a large share of a download's cost (docs/performance.md, "Archive
downloads: one thread-pool trip before the first byte"). The descriptor then has one
owner at a time, first `blob_response`, then the response, and is closed on every
path that does not send it to its end (304, HEAD, a refused range, a client gone,
an error, a cancellation).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import warnings
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

from starlette.concurrency import run_in_threadpool
from starlette.responses import FileResponse
from starlette.types import Receive, Scope, Send

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


class OpenBlob:
    """A blob file's descriptor and stat, got in one worker-thread trip; `close()`
    is idempotent and safe from any path.

    A cancellation can interrupt `open()` while its thread still runs (asyncio's
    `task.cancel()` does not wait for the thread): the thread then finds the
    blob abandoned and closes the descriptor itself, so none is ever lost."""

    __slots__ = ("_abandoned", "_lock", "fd", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1
        self._abandoned = False
        self._lock = threading.Lock()

    async def open(self) -> os.stat_result:
        """Open and fstat on a worker thread; on any failure nothing stays open."""
        try:
            return await run_in_threadpool(self._open_and_stat)
        except BaseException:
            self.close()
            raise

    def _open_and_stat(self) -> os.stat_result:  # on a worker thread
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            stat = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        with self._lock:
            if not self._abandoned:
                self.fd = fd
                return stat
        os.close(fd)  # its opener was cancelled meanwhile: nobody else will
        return stat

    def close(self) -> None:
        with self._lock:
            fd, self.fd, self._abandoned = self.fd, -1, True
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        # A backstop, as for an unclosed file object: a response built and
        # dropped without being sent must not keep its descriptor.
        if self.fd >= 0:
            self.close()  # first: under `-W error` the warning raises
            warnings.warn(f"unclosed blob descriptor {self.path}", ResourceWarning, stacklevel=1)


class BlobFileResponse(FileResponse):
    """FileResponse reading `opened`'s descriptor through PageCacheFile, and
    closing it however the answer ends."""

    chunk_size = PIECE

    def __init__(
        self,
        opened: OpenBlob,
        stat_result: os.stat_result,
        *,
        media_type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.opened = opened
        super().__init__(
            opened.path, headers=headers, media_type=media_type, stat_result=stat_result
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # The whole body sent, or HEAD, a refused range (400/416), a client
            # gone before or during the body, an error, a cancellation: this
            # response owns the descriptor on every one of those paths.
            self.opened.close()

    @contextlib.asynccontextmanager
    async def _open_file(self) -> AsyncIterator[Any]:
        # Opened already (blob_response); closed by __call__. The size is known:
        # blobs never change.
        assert self.stat_result is not None
        yield PageCacheFile(self.opened.fd, self.opened.path, self.stat_result.st_size)

"""Blob files are sent in bounded pieces, read from the page cache on the event
loop or, when not cached, on a worker thread (gitreg/api/blob_file.py; issue
16, target 2). A real `gitreg serve` over TLS answers whole files, single
ranges and multiple ranges with the exact bytes, whatever the file's size
against the piece size."""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import starlette.concurrency
from starlette.types import Message, Receive, Scope, Send

from gitreg.api import blob_file
from gitreg.api.blob_file import PIECE, BlobFileResponse, OpenBlob, PageCacheFile
from gitreg.storage.blobs import FileBlobStore
from tests.support.server import RunningServer

SIZES = (0, 1, PIECE - 1, PIECE, PIECE + 1, 5 * PIECE + 123)


def test_pieces_are_bounded() -> None:
    assert BlobFileResponse.chunk_size == PIECE <= 128 * 1024


@pytest.mark.parametrize("nowait", [True, False])
def test_reads_return_every_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nowait: bool
) -> None:
    """With the non-blocking read and without it (a platform lacking it, or
    pages not cached), pieces are full until EOF and seeks are honoured."""
    if not nowait:
        monkeypatch.setattr(blob_file, "_nowait", [0])
    data = random.Random(1).randbytes(3 * PIECE + 17)
    path = tmp_path / "blob"
    path.write_bytes(data)

    async def read_all(start: int) -> list[bytes]:
        file = PageCacheFile(os.open(path, os.O_RDONLY))
        await file.seek(start)
        pieces = []
        while piece := await file.read(PIECE):
            pieces.append(piece)
        await file.aclose()
        return pieces

    pieces = anyio.run(read_all, 0)
    assert b"".join(pieces) == data
    assert [len(p) for p in pieces] == [PIECE, PIECE, PIECE, 17]
    assert b"".join(anyio.run(read_all, PIECE + 5)) == data[PIECE + 5 :]


def test_uncached_pages_are_read(tmp_path: Path) -> None:
    """Pages dropped from the page cache are read off the event loop, in full."""
    data = random.Random(2).randbytes(2 * PIECE)
    path = tmp_path / "blob"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)

    async def read() -> bytes:
        file = PageCacheFile(fd)
        first = await file.read(PIECE)
        return first + await file.read(PIECE)

    try:
        assert anyio.run(read) == data
    finally:
        os.close(fd)


def test_server_sends_exact_bytes(data_dir: Path, servers: Callable[..., RunningServer]) -> None:
    store = FileBlobStore(data_dir / "blobs")
    rng = random.Random(3)
    blobs = {size: rng.randbytes(size) for size in SIZES}
    names = {size: store.put_bytes(data).sha256 for size, data in blobs.items()}
    server = servers(data_dir)
    with httpx.Client(verify=server.ssl_context()) as client:
        for size, data in blobs.items():
            url = f"{server.url}/archives/{names[size]}.tar.gz"
            answer = client.get(url)
            assert answer.status_code == 200
            assert answer.content == data
            assert answer.headers["content-length"] == str(size)
            if size < 2:
                continue
            ranged = client.get(url, headers={"Range": f"bytes=1-{size - 1}"})
            assert ranged.status_code == 206
            assert ranged.content == data[1:]
        big = blobs[SIZES[-1]]
        url = f"{server.url}/archives/{names[SIZES[-1]]}.tar.gz"
        multi = client.get(url, headers={"Range": f"bytes=0-9,{PIECE}-{2 * PIECE + 9}"})
        assert multi.status_code == 206
        assert big[:10] in multi.content
        assert big[PIECE : 2 * PIECE + 10] in multi.content


def test_a_file_system_without_nowait_reads_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel or file system that refuses RWF_NOWAIT (EOPNOTSUPP) gets every
    byte through the worker thread, and is not asked again."""
    data = random.Random(4).randbytes(2 * PIECE + 5)
    path = tmp_path / "blob"
    path.write_bytes(data)
    real = os.preadv
    asked: list[int] = []

    def refusing(fd: int, buffers: list[bytearray], offset: int, flags: int = 0) -> int:
        if flags:
            asked.append(flags)
            raise OSError(errno.EOPNOTSUPP, "not supported")
        return real(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", refusing)
    monkeypatch.setattr(blob_file, "_nowait", [os.RWF_NOWAIT])

    async def read_all() -> bytes:
        file = PageCacheFile(os.open(path, os.O_RDONLY))
        out = b""
        while piece := await file.read(PIECE):
            out += piece
        await file.aclose()
        return out

    assert anyio.run(read_all) == data
    assert len(asked) == 1


async def _respond(path: Path, scope: Scope, receive: Receive, send: Send) -> None:
    """What blob_response does for a local blob: open, then answer from that descriptor."""
    opened = OpenBlob(str(path))
    stat = await opened.open()
    await BlobFileResponse(opened, stat)(scope, receive, send)


def test_the_response_reads_through_page_cache_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BlobFileResponse replaces Starlette's private `_open_file`: should a
    Starlette release rename it, 1 MiB thread reads would come back unnoticed."""
    data = random.Random(4).randbytes(2 * PIECE + 1)
    path = tmp_path / "blob"
    path.write_bytes(data)
    reads: list[int] = []
    real_read = PageCacheFile.read

    async def counted(self: PageCacheFile, size: int) -> bytes:
        reads.append(size)
        return await real_read(self, size)

    monkeypatch.setattr(PageCacheFile, "read", counted)
    sent: list[Message] = []

    async def receive() -> Message:
        await anyio.sleep_forever()  # the client stays connected
        raise AssertionError

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""}
    anyio.run(_respond, path, scope, receive, send)
    assert b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body") == data
    assert reads == [PIECE, PIECE, PIECE]


@pytest.mark.parametrize("size", [2, PIECE - 1, PIECE, 2 * PIECE + 5])
def test_cached_files_are_sent_without_thread_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    """With the size known, the last piece is not followed by a thread-pool read
    that only finds the end of the file (for an archive under one piece, its
    only read), and a range ends where it asks."""
    if not blob_file._NOWAIT:
        pytest.skip("no RWF_NOWAIT on this platform")
    # Whatever an earlier test's file system made of the process-wide switch
    # (one that refuses RWF_NOWAIT turns it off for good), this one has it.
    monkeypatch.setattr(blob_file, "_nowait", [blob_file._NOWAIT])
    data = random.Random(5).randbytes(size)
    path = tmp_path / "blob"
    path.write_bytes(data)  # just written: in the page cache
    trips: list[object] = []
    real = starlette.concurrency.run_in_threadpool

    async def counted(func: Callable[..., object], *args: object) -> object:
        trips.append(func)
        return await real(func, *args)

    monkeypatch.setattr(blob_file, "run_in_threadpool", counted)

    async def receive() -> Message:
        await anyio.sleep_forever()
        raise AssertionError

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    for headers, expected in (([], data), ([(b"range", b"bytes=1-")], data[1:])):
        sent.clear()
        scope: dict[str, Any] = {"type": "http", "method": "GET", "path": "/"}
        scope.update(headers=headers, query_string=b"")
        anyio.run(_respond, path, scope, receive, send)
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        assert body == expected
    # Opening the file only, once per answer.
    assert [getattr(f, "__name__", f) for f in trips] == ["_open_and_stat"] * 2

"""Cached pieces of a blob file are handed over as views of a read-only map of
the page cache, never waiting for the disk, and a download keeps only the piece
it is at mapped (gitreg/api/mapped_file.py; issue 16, targets 7 and 2)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import anyio

from gitreg.api.blob_file import PIECE, PageCacheFile


def _blob(tmp_path: Path, size: int) -> tuple[Path, bytes]:
    data = random.Random(size).randbytes(size)
    path = tmp_path / "blob"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.preadv(fd, [bytearray(size)], 0)  # every page in the page cache
    finally:
        os.close(fd)
    return path, data


def _mapped_kib(path: Path) -> int:
    """Resident KiB of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            first = line.split(maxsplit=1)[0]
            if "-" in first and not first.endswith(":"):
                inside = line.rstrip().endswith(str(path))
            elif inside and first == "Rss:":
                total += int(line.split()[1])
    return total


def test_cached_pieces_are_views_of_the_page_cache(tmp_path: Path) -> None:
    path, data = _blob(tmp_path, 3 * PIECE + 17)

    async def read_all(start: int) -> list[bytes]:
        file = PageCacheFile(os.open(path, os.O_RDONLY))
        await file.seek(start)
        pieces = []
        while piece := await file.read(PIECE):
            pieces.append(piece)
        await file.aclose()
        return pieces

    pieces = anyio.run(read_all, 0)
    assert all(isinstance(piece, memoryview) and piece.readonly for piece in pieces)
    assert [len(piece) for piece in pieces] == [PIECE, PIECE, PIECE, 17]
    # The views outlive the file: the map stays until the last of them is gone.
    assert b"".join(pieces) == data
    assert b"".join(anyio.run(read_all, PIECE + 5)) == data[PIECE + 5 :]


def test_a_download_keeps_about_one_piece_mapped(tmp_path: Path) -> None:
    """Even with every view still held (a slow connection), pages passed are
    unmapped: the worker's resident memory does not grow with the file."""
    path, data = _blob(tmp_path, 16 * PIECE)

    async def read_all() -> tuple[list[bytes], int]:
        file = PageCacheFile(os.open(path, os.O_RDONLY))
        pieces = [await file.read(PIECE) for _ in range(16)]
        mapped = _mapped_kib(path)
        await file.aclose()
        return pieces, mapped

    pieces, mapped = anyio.run(read_all)
    assert all(isinstance(piece, memoryview) for piece in pieces)
    assert mapped <= PIECE // 1024
    assert b"".join(pieces) == data


def test_uncached_pages_are_not_mapped(tmp_path: Path) -> None:
    """A piece not in the page cache is read as before (on a worker thread),
    not faulted in on the event loop."""
    path, data = _blob(tmp_path, 2 * PIECE)
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)  # written pages are dropped from the cache only once clean
    # The whole file: a large folio is dropped only whole.
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)

    async def read() -> list[bytes]:
        file = PageCacheFile(fd)
        return [await file.read(PIECE), await file.read(PIECE)]

    try:
        first, second = anyio.run(read)
    finally:
        os.close(fd)
    assert isinstance(first, bytearray)
    # (The read of the first piece may have brought the second back by readahead.)
    assert first + bytes(second) == data

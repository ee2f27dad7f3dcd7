"""`MappedFile`: pieces of a blob file handed to the TLS layer straight from the
page cache, through a read-only memory map, when every page of the piece is
cached.

Why (issue 16, target 7): over TLS, OpenSSL reads each piece once to encrypt it.
A `preadv` first copies the piece out of the page cache into a fresh buffer, and
that copy, with the buffer's zeroing, was about a sixth of gitreg's CPU per GB
against nginx's (docs/performance.md, "Archives over TLS"). Encrypting from a
mapping of the page cache skips it.

What the map must not do:

- Wait for the disk on the event loop. A piece is only mapped when mincore(2)
  says each of its pages is in the page cache (asked on a second mapping of the
  file that is never read, so it costs no memory); anything else is read as
  before (gitreg/api/blob_file.py). MADV_POPULATE_READ then maps the piece's
  pages in one call instead of a page fault per 16 pages.
- Grow the worker's memory with the file: pages the download has passed are
  unmapped again (MADV_DONTNEED; a view the server still holds faults them back
  in from the page cache, with the same bytes), so each download keeps about one
  piece mapped (bench/rss.py).
- Unmap under a view still being sent: Python's mmap refuses to close while a
  memoryview of it lives, so the map is left to be unmapped when the last one goes.

Blob files are written to a temporary name and renamed into place, and never
written again (gitreg/storage/blobs.py), so no mapped page can shrink away
under a download (which would be SIGBUS).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import sys

PAGE = mmap.PAGESIZE
# Linux 5.14+; older kernels answer EINVAL and the pages then fault in as read.
_MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)
_populate = [sys.platform == "linux"]
# mincore(2) sets the low bit of a page's byte when the page is resident.
_RESIDENT = bytes(value & 1 for value in range(256))


def _libc() -> ctypes.CDLL | None:
    if sys.platform != "linux":  # mincore's meaning and MADV_* values are Linux's here
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_long,
        ]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()
_MAP_FAILED = ctypes.c_void_p(-1).value


class MappedFile:
    """One open blob file's map; `piece` answers None where it cannot help."""

    def __init__(self, fd: int, size: int) -> None:
        if _LIBC is None or size == 0:
            raise OSError(errno.ENOTSUP, "no page-cache map on this platform")
        self.size = size
        self._map = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        probe = _LIBC.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if probe in (None, _MAP_FAILED):
            self._map.close()
            raise OSError(ctypes.get_errno(), "mmap failed")
        self._probe: int = probe
        self._dropped = 0  # pages below this offset are unmapped again

    def piece(self, start: int, size: int) -> memoryview | None:
        """Bytes `start` up to `start + size` (fewer at the end of the file), or
        None if one of their pages is not in the page cache."""
        end = min(start + size, self.size)
        first = start - start % PAGE
        if end <= start or not self._cached(first, end - first):
            return None
        if _populate[0]:
            try:
                self._map.madvise(_MADV_POPULATE_READ, first, end - first)
            except OSError:  # an older kernel: pages fault in as they are read
                _populate[0] = False
        if first > self._dropped:
            self._map.madvise(mmap.MADV_DONTNEED, self._dropped, first - self._dropped)
            self._dropped = first
        return memoryview(self._map)[start:end]

    def _cached(self, first: int, length: int) -> bool:
        assert _LIBC is not None
        pages = (ctypes.c_ubyte * ((length + PAGE - 1) // PAGE))()
        if _LIBC.mincore(self._probe + first, length, pages) != 0:
            return False
        return b"\0" not in bytes(pages).translate(_RESIDENT)

    def close(self) -> None:
        if self._probe:
            assert _LIBC is not None
            _LIBC.munmap(self._probe, self.size)
            self._probe = 0
        # A view still queued on a connection keeps the map; it is unmapped
        # when the last view is gone.
        with contextlib.suppress(BufferError):
            self._map.close()

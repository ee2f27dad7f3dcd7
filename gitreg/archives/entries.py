"""Every entry of an archive read from outside counts toward its limit.

Archives that come from outside are read through here: a proxied module's
tar.gz or zip (gitreg/module_proxy/archive_source.py) and every provider zip,
uploaded, taken from a forge release or mirrored (gitreg/providers/package.py).
Each entry, whatever its kind (file, directory, symlink, hard link, device,
FIFO), counts before anything of it is kept, so an archive of a few hundred
thousand empty entries stops at the limit instead of being walked whole.
What is left out is tallied and reported as one line, never a line per entry.

A zip's central directory is counted before `zipfile` reads it: zipfile makes
an object of every entry first, so a 1 GiB zip of empty entries would cost
gigabytes before anyone could count them.

A tar is opened with `open_tar`: `tarfile` reads a pax or GNU long-name
header whole into memory, whatever size its block claims, and a few
megabytes of gzip unpack to gigabytes of header; sparse files (whose maps
grow the same way) have no place in a module and are refused.
"""

from __future__ import annotations

import os
import struct
import tarfile
import zipfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, Literal

from gitreg.errors import ArchiveTooLarge

__all__ = ["EntryCounter", "check_zip_entries", "left_out_line", "open_tar", "open_zip"]

# APPNOTE.TXT 4.3.16, 4.3.15, 4.3.14 and 4.3.12, as zipfile reads them.
_END = struct.Struct("<4s4H2LH")
_END_SIGNATURE = b"PK\x05\x06"
_END64_LOCATOR = struct.Struct("<4sLQL")
_END64_LOCATOR_SIGNATURE = b"PK\x06\x07"
_END64 = struct.Struct("<4sQ2H2L4Q")
_END64_SIGNATURE = b"PK\x06\x06"
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")
_CENTRAL_SIGNATURE = b"PK\x01\x02"
_MAX_COMMENT = 1 << 16  # as zipfile searches for the end record
_SHOWN = 3  # entries named in a summary line


class EntryCounter:
    """Counts one archive's entries against `limit` and tallies those left out."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.entries = 0
        self._left_out: Counter[str] = Counter()
        self._first = ""

    def count(self) -> None:
        """One more entry, of any kind; raises `ArchiveTooLarge` past the limit."""
        self.entries += 1
        if self.entries > self.limit:
            raise ArchiveTooLarge(too_many(self.limit))

    def leave_out(self, name: str, kind: str) -> None:
        """An entry (already counted) that is not kept, such as a FIFO or a device."""
        if not self._left_out:
            self._first = name[:200]
        self._left_out[kind] += 1

    def summary(self) -> str | None:
        """One line for every entry left out, or None when none was."""
        if not self._left_out:
            return None
        total = sum(self._left_out.values())
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(self._left_out.items()))
        return (
            f"{total} entries that are not files, directories or symlinks ({kinds}),"
            f" the first {self._first!r}"
        )


def too_many(limit: int) -> str:
    return (
        f"the archive has more than {limit} entries"
        " (files, directories, links and every other kind count)"
    )


def left_out_line(skipped: Sequence[str]) -> str:
    """`"path: reason"` lines of entries left out, as one log line: the first few
    and how many more."""
    more = len(skipped) - _SHOWN
    return "; ".join(skipped[:_SHOWN]) + (f"; and {more} more" if more > 0 else "")


def open_zip(path: Path, limit: int) -> zipfile.ZipFile:
    """`zipfile.ZipFile(path)` once its central directory is known to hold at most
    `limit` entries; raises `ArchiveTooLarge` otherwise, and zipfile's own errors."""
    with path.open("rb") as raw:
        check_zip_entries(raw, limit)
    archive = zipfile.ZipFile(path)
    if len(archive.infolist()) > limit:  # a layout check_zip_entries left to zipfile
        archive.close()
        raise ArchiveTooLarge(too_many(limit))
    return archive


def check_zip_entries(raw: BinaryIO, limit: int) -> None:
    """Raise `ArchiveTooLarge` when the central directory holds more than `limit`
    entries, reading at most `limit + 1` of its headers and keeping none. The
    directory is found and walked as zipfile does (`_EndRecData`,
    `_RealGetContents`); anything malformed is left to zipfile, which refuses it."""
    found = _central_directory(raw)
    if found is None:
        return
    start, size = found
    raw.seek(start)
    seen = read = 0
    while read < size:
        header = raw.read(_CENTRAL.size)
        if len(header) < _CENTRAL.size or header[:4] != _CENTRAL_SIGNATURE:
            return
        seen += 1
        if seen > limit:
            raise ArchiveTooLarge(too_many(limit))
        name, extra, comment = struct.unpack_from("<3H", header, 28)
        raw.seek(name + extra + comment, os.SEEK_CUR)
        read += _CENTRAL.size + name + extra + comment


def _central_directory(raw: BinaryIO) -> tuple[int, int] | None:
    """(offset, size) of the central directory, or None if there is no end record."""
    file_size = raw.seek(0, os.SEEK_END)
    if file_size < _END.size:
        return None
    tail_size = min(file_size, _END.size + _MAX_COMMENT)
    raw.seek(file_size - tail_size)
    tail = raw.read(tail_size)
    at = len(tail) - _END.size
    if not (tail[at:].startswith(_END_SIGNATURE) and tail[-2:] == b"\0\0"):
        at = tail.rfind(_END_SIGNATURE)
        if at < 0 or at + _END.size > len(tail):
            return None
    end = file_size - tail_size + at
    fields = _END.unpack_from(tail, at)
    size, end_of_directory = fields[5], end
    if end >= _END64_LOCATOR.size:
        raw.seek(end - _END64_LOCATOR.size)
        locator = raw.read(_END64_LOCATOR.size)
        if locator.startswith(_END64_LOCATOR_SIGNATURE) and end >= (
            _END64_LOCATOR.size + _END64.size
        ):
            raw.seek(end - _END64_LOCATOR.size - _END64.size)
            record = raw.read(_END64.size)
            if record.startswith(_END64_SIGNATURE):
                size = _END64.unpack(record)[8]
                end_of_directory = end - _END64_LOCATOR.size - _END64.size
    start = end_of_directory - size
    return (start, size) if start >= 0 else None


# A pax header holds a path, a link target and a few numbers: kilobytes.
MAX_TAR_HEADER_BYTES = 256 * 1024
_HEADER_TYPES = {
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
}


class _BoundedTarInfo(tarfile.TarInfo):
    """A member whose metadata header is read only when it is small, and
    never a sparse file. The hooks are tarfile's per-kind readers, the only
    places such a header's size is known before it is read."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _HEADER_TYPES and self.size > MAX_TAR_HEADER_BYTES:
            raise tarfile.HeaderError(
                f"a tar header of {self.size} bytes (more than {MAX_TAR_HEADER_BYTES})"
            )
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise tarfile.HeaderError("a sparse file")
        member: tarfile.TarInfo = super()._proc_member(tarfile_)  # type: ignore[misc]
        return member

    def _proc_gnusparse_00(self, *_: object) -> None:
        raise tarfile.HeaderError("a sparse file")

    _proc_gnusparse_01 = _proc_gnusparse_10 = _proc_gnusparse_00


def open_tar(
    source: Path | None = None,
    mode: Literal["r:*", "r:gz"] = "r:*",
    fileobj: BinaryIO | None = None,
) -> tarfile.TarFile:
    """A tar from outside, read as `tarfile.open` reads it, with its headers
    bounded (`tarfile.HeaderError`, a `TarError`, when one is not)."""
    return tarfile.open(source, mode=mode, fileobj=fileobj, tarinfo=_BoundedTarInfo)

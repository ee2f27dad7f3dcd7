"""The `h1:` member hashes of a provider zip, computed while the zip arrives.

Hashing the members as the bytes come takes the unzipping for `h1:` out of
the work a mirror cold miss does after the zip's last byte
(gitreg/providers/package.py, docs/performance.md). `StreamedMembers` is fed
the zip's bytes in order as they are written: it reads each local file header
(APPNOTE.TXT 4.3.7), inflates the member's data as it comes (stored and
deflated members; data descriptors after a deflated member, 4.3.9; zip64
sizes, 4.5.3) and keeps the sha256 of what each member unpacks to.

It decides nothing. `inspect_package` still opens the finished file's central
directory and applies every check of the whole-file path to it (names,
duplicates, symlinks, encryption, declared sizes, the executable); only then
does it ask `digests` for the member hashes, which are given only when every
central directory entry matches a member read here exactly: same header
offset, name as zipfile decodes it, method, compressed and unpacked sizes,
CRC-32, no overlap. Then the bytes hashed here are the bytes zipfile would have
unpacked, and the hashes are the same. On any disagreement, or a layout this
parser does not follow (prepended data, other methods, a stored member with a
data descriptor, an unpacked total over the limit), it answers None and the
whole-file pass runs as before: never less checking, only earlier.
"""

from __future__ import annotations

import hashlib
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

_LOCAL = b"PK\x03\x04"
_CENTRAL = b"PK\x01\x02"
_END = b"PK\x05\x06"
_DESCRIPTOR = b"PK\x07\x08"
_HEADER = struct.Struct("<4s5H3L2H")  # local file header, 30 bytes (APPNOTE 4.3.7)
_FOLLOWED = 0x08  # general purpose bit 3: sizes and CRC in a data descriptor
_UTF8 = 0x800  # general purpose bit 11: the name is UTF-8
_KNOWN_FLAGS = 0x01 | 0x02 | 0x04 | _FOLLOWED | _UTF8  # anything else: whole-file pass
_STORED, _DEFLATED = 0, 8
_ZIP64 = 0xFFFFFFFF
_OUT = 1024 * 1024  # most bytes inflated per call: a bomb never sits in memory


def _crc32() -> Callable[[ReadableBuffer, int], int]:
    """ISA-L's CRC-32 is the same function as zlib's, several times faster
    (docs/performance.md): a declared dependency (archives,
    gitreg/archives/format.py), absent on some platforms, imported only when a
    zip streams (a serving worker that never mirrors does not load it:
    tests/server/test_serve_imports.py). Inflating stays zlib's, the inflater
    zipfile uses, so a malformed deflate stream cannot unpack differently here
    than in the whole-file pass."""
    try:
        from isal.isal_zlib import crc32
    except ImportError:  # platforms without the isal wheel
        return zlib.crc32
    return crc32


@dataclass
class _Member:
    """One local entry as read from the stream."""

    offset: int  # of its local header in the file
    raw_name: bytes
    flags: int
    method: int
    data_start: int
    compressed: int | None  # from the header; None until its data descriptor
    zip64: bool
    consumed: int = 0  # compressed bytes read
    unpacked: int = 0
    crc: int = 0
    digest: str = ""

    def name(self) -> str:
        """As zipfile decodes a local header's name (ZipFile.open)."""
        return self.raw_name.decode("utf-8" if self.flags & _UTF8 else "cp437")


class StreamedMembers:
    """Feed the zip's bytes in order (`feed`), then ask `digests` at the end."""

    def __init__(self, max_unpacked: int, max_files: int) -> None:
        self._max_unpacked = max_unpacked
        self._max_files = max_files
        self._pending = bytearray()  # header bytes that arrived split across pieces
        self._offset = 0  # file offset of the next byte not yet taken
        self._members: dict[int, _Member] = {}
        self._current: _Member | None = None
        self._inflate: zlib._Decompress | None = None
        self._hash = hashlib.sha256()
        self._state = "header"  # header, data, descriptor, done, failed
        self._unpacked = 0
        self.reason = ""  # why it gave up, for tests and logs
        self._crc32 = _crc32()

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._state in ("done", "failed"):
            return
        try:
            self._feed(memoryview(data).cast("B"))
        except (zlib.error, struct.error, UnicodeDecodeError, ValueError) as exc:
            self._give_up(f"unreadable: {exc}")

    def _feed(self, view: memoryview) -> None:
        while self._state not in ("done", "failed"):
            if self._state == "data":
                if not len(view):
                    return
                view = self._data(view)
                continue
            need = self._needed()
            if need is None:
                return  # given up, or the central directory was reached
            if len(self._pending) < need:
                if not len(view):
                    return
                take = min(need - len(self._pending), len(view))
                self._pending += view[:take]
                view = view[take:]
                continue  # a longer header may need more than it first said
            if self._state == "header":
                self._header(bytes(self._pending))
            else:
                self._descriptor(bytes(self._pending))

    def _needed(self) -> int | None:
        """Bytes `_pending` must hold before the header or descriptor can be read."""
        pending = self._pending
        if self._state == "header":
            if len(pending) < 4:
                return 4
            if pending[:4] != _LOCAL:
                self._not_a_member()
                return None
            if len(pending) < _HEADER.size:
                return _HEADER.size
            nlen, xlen = struct.unpack_from("<2H", pending, 26)
            return int(_HEADER.size + nlen + xlen)
        member = self._current
        assert member is not None
        sizes = 16 if member.zip64 else 8
        if len(pending) < 4:
            return 4
        return 4 + 4 + sizes if pending[:4] == _DESCRIPTOR else 4 + sizes

    def _not_a_member(self) -> None:
        if self._pending[:4] in (_CENTRAL, _END) and self._members:
            self._state = "done"  # the central directory: read from the file at the end
        else:
            self._give_up(f"no local header at byte {self._offset}")

    def _header(self, raw: bytes) -> None:
        (_, _, flags, method, _, _, _, csize, _, nlen, _) = _HEADER.unpack_from(raw)
        offset = self._offset
        self._offset += len(raw)
        self._pending.clear()
        zip64 = _zip64_sizes(raw[_HEADER.size + nlen :])
        if flags & ~_KNOWN_FLAGS or method not in (_STORED, _DEFLATED):
            self._give_up(f"flags {flags:#x}, method {method} at byte {offset}")
        elif flags & _FOLLOWED and method == _STORED:
            self._give_up("a stored member whose size only its data descriptor gives")
        elif len(self._members) >= self._max_files:
            self._give_up("more entries than the limit")
        if self._state == "failed":
            return
        compressed: int | None = None
        if not flags & _FOLLOWED:
            compressed = zip64[1] if csize == _ZIP64 and zip64 else csize
        name = raw[_HEADER.size : _HEADER.size + nlen]
        member = _Member(offset, name, flags, method, self._offset, compressed, zip64 is not None)
        self._members[offset] = member
        self._current = member
        self._hash = hashlib.sha256()
        self._inflate = zlib.decompressobj(-15) if method == _DEFLATED else None
        self._state = "data"
        if compressed == 0:
            self._end_data()

    def _data(self, view: memoryview) -> memoryview:
        """Takes the member's bytes from `view`; returns what follows them."""
        member = self._current
        assert member is not None
        if member.compressed is not None:
            # As zipfile does: exactly the declared compressed bytes are the member's.
            take = min(len(view), member.compressed - member.consumed)
            if self._inflate is None:
                self._unpack(view[:take])
            else:
                self._inflate_piece(view[:take])
            member.consumed += take
            self._offset += take
            if member.consumed == member.compressed and self._state == "data":
                self._end_data()
            return view[take:]
        # Deflated, sizes in a data descriptor: the deflate stream's end says
        # where the member ends (APPNOTE 4.3.9.1).
        left = self._inflate_piece(view)
        used = len(view) - left
        member.consumed += used
        self._offset += used
        if self._inflate is not None and self._inflate.eof and self._state == "data":
            self._end_data()
        return view[used:]

    def _inflate_piece(self, piece: memoryview) -> int:
        """Inflates `piece` in bounded steps; returns how many of its bytes came
        after the deflate stream's end (they belong to the next record)."""
        inflate = self._inflate
        assert inflate is not None
        data: bytes | memoryview = piece
        while len(data) and self._state == "data" and not inflate.eof:
            self._unpack(inflate.decompress(data, _OUT))
            data = inflate.unconsumed_tail
        while not inflate.eof and inflate.unconsumed_tail == b"" and self._state == "data":
            flushed = inflate.decompress(b"", _OUT)  # output still held inside zlib
            if not flushed:
                break
            self._unpack(flushed)
        return len(inflate.unused_data) if inflate.eof else 0

    def _unpack(self, chunk: bytes | memoryview) -> None:
        member = self._current
        assert member is not None
        self._unpacked += len(chunk)
        if self._unpacked > self._max_unpacked:
            self._give_up("unpacks to more than the limit")
            return
        member.unpacked += len(chunk)
        member.crc = self._crc32(chunk, member.crc)
        self._hash.update(chunk)

    def _end_data(self) -> None:
        member = self._current
        assert member is not None
        member.digest = self._hash.hexdigest()
        self._inflate = None
        self._state = "descriptor" if member.flags & _FOLLOWED else "header"

    def _descriptor(self, raw: bytes) -> None:
        """Read only to find the next header: the sizes and CRC checked are the
        central directory's, as zipfile uses."""
        self._offset += len(raw)
        self._pending.clear()
        self._state = "header"

    def _give_up(self, reason: str) -> None:
        self._state, self.reason = "failed", reason
        self._inflate = None
        self._members.clear()

    def digests(self, infos: list[zipfile.ZipInfo]) -> dict[str, str] | None:
        """The sha256 hex of each entry's unpacked bytes, by name, when every entry
        of the central directory (`infos`, as zipfile read it) is a member read
        here byte for byte; None otherwise (the whole-file pass decides)."""
        if self._state != "done":
            self.reason = self.reason or f"the stream ended while reading a {self._state}"
            return None
        found: dict[str, str] = {}
        for info in infos:
            member = self._members.get(info.header_offset)
            problem = _mismatch(info, member)
            if problem:
                self.reason = f"{info.filename[:80]!r}: {problem}"
                return None
            assert member is not None
            found[info.filename] = member.digest
        return found


def _mismatch(info: zipfile.ZipInfo, member: _Member | None) -> str:
    if member is None:
        return "no local header read at its offset"
    if member.name() != info.orig_filename:
        return "its local header names another file"
    if member.method != info.compress_type or info.flag_bits & ~_KNOWN_FLAGS:
        return "method or flags differ from its local header"
    if member.consumed != info.compress_size or member.unpacked != info.file_size:
        return "sizes differ from what was read"
    if member.crc != info.CRC:
        return "CRC-32 differs from what was read"
    # zipfile's own overlap check (CVE-2024-0450): the next entry's start.
    end = getattr(info, "_end_offset", None)
    if end is not None and member.data_start + info.compress_size > end:
        return "overlaps the next entry"
    return ""


def _zip64_sizes(extra: bytes) -> tuple[int, int] | None:
    """(unpacked, compressed) from a local header's zip64 extra field (0x0001)."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack_from("<2H", extra, pos)
        if tag == 1 and size >= 16:
            unpacked, compressed = struct.unpack_from("<2Q", extra, pos + 4)
            return unpacked, compressed
        pos += 4 + size
    return None

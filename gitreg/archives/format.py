"""The bytes of a module archive: tar members written directly, and the gzip around them.

`gitreg/archives/build.py` decides what goes into an archive; this module only writes it. A
build's time goes to two things (docs/performance.md "Publishing"): gzip, and `tarfile`
building each header through its PAX machinery. So:

- `TarStream` writes the 512-byte ustar header itself for the common entry (ASCII name
  and target of at most 100 bytes, numbers that fit their octal fields) and hands any
  other entry to `tarfile.TarInfo.tobuf`, so the tar bytes are exactly what `tarfile`
  writes in PAX format (tests/archives/test_archive_format.py compares them);
- the gzip layer is a *builder*, named by a string stored with every archive it makes
  (`archives.builder`, migration 0017). `CLASSIC` is the zlib level 6 stream every
  archive before 0017 was built with; `fast_builder()` is ISA-L's igzip (the `isal`
  package) at level 1, many times faster than zlib 6 for slightly larger archives
  (docs/performance.md "Publishing at scale"), and falls back to `CLASSIC` where the
  `isal` wheel is missing. An archive already published is never rebuilt, so a change
  of builder only affects archives built after it.
"""

from __future__ import annotations

import contextlib
import gzip
import tarfile
from collections.abc import Iterator
from typing import BinaryIO, Protocol

__all__ = ["CLASSIC", "TarEntry", "TarStream", "fast_builder", "gzip_writer", "tar_entry"]

# The builder of every archive gitreg made before migration 0017 (recorded as the
# column's default): PAX tar, Python's gzip with zlib at level 6.
CLASSIC = "tar-pax+zlib-6"

_BLOCK = 512
_RECORD = 20 * _BLOCK  # tarfile pads the archive to whole records
_CHUNK = 256 * 1024
_NAME_MAX = 100
_ZEROS = bytes(_BLOCK)
# Octal fields of a ustar header hold digits-1 digits plus a NUL (tarfile's `itn`).
_SIZE_MAX = 8**11
_MTIME_MAX = 8**11


class _Writable(Protocol):
    def write(self, data: bytes, /) -> int: ...


def fast_builder() -> str:
    """The builder for new archives: ISA-L level 1 if its wheel imports, else CLASSIC.

    The name carries the ISA-L version: deflate output is only promised to be the same
    for the same library and level, and this is what makes an archive's bytes
    reproducible.
    """
    try:
        import isal
    except ImportError:
        return CLASSIC
    return f"tar-pax+isal-{isal.ISAL_VERSION}-1"


@contextlib.contextmanager
def gzip_writer(out: BinaryIO, builder: str) -> Iterator[_Writable]:
    """A gzip stream into `out` with a fixed header (mtime 0, no file name)."""
    if builder == CLASSIC:
        with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="", compresslevel=6) as gz:
            yield gz
        return
    if not builder.startswith("tar-pax+isal-"):
        raise ValueError(f"unknown archive builder {builder!r}")
    from isal import igzip

    if builder != fast_builder():
        # Another ISA-L version could deflate differently: refuse rather than record
        # bytes under a builder name that did not make them.
        raise ValueError(f"archive builder {builder!r} is not this installation's")
    level = int(builder.rsplit("-", 1)[1])
    gzip_file = igzip.GzipFile  # untyped in the isal package
    with gzip_file(filename="", fileobj=out, mode="wb", mtime=0, compresslevel=level) as gz:  # type: ignore[no-untyped-call]
        yield gz


class TarEntry:
    """One member, ready to be written at any mtime: a build keeps these for the
    directories it walked, so a later build of a tree with the same directory writes
    them again without reading an object or building a header
    (gitreg/archives/cache.py). `head`/`tail` are the ustar header around its mtime
    and checksum fields, or empty when `tarfile` must write the header."""

    __slots__ = ("base", "data", "digest", "head", "key", "kind", "link", "name", "perm", "tail")

    def __init__(self, name: str, kind: bytes, perm: int, data: bytes, link: str) -> None:
        self.name, self.kind, self.perm, self.data, self.link = name, kind, perm, data, link
        self.head = self.tail = b""
        self.base = 0
        self.key: object = None  # what it was made from, for a cache to find it by
        self.digest = ""  # hex sha256 of `data`, once the archive's dirHash needed it
        # `_ustar_header`'s fields around the mtime, without a TarInfo (cold builds
        # make one entry per file): when it would write a plain ustar header.
        if (
            name.isascii()
            and link.isascii()
            and len(name) <= _NAME_MAX
            and len(link) <= _NAME_MAX
            and kind in (tarfile.REGTYPE, tarfile.SYMTYPE)
            and len(data) < _SIZE_MAX
        ):
            self.head = b"%s%07o\0%s%011o\0" % (
                name.encode("ascii").ljust(_NAME_MAX, b"\0"),
                perm & 0o7777,
                b"0000000\0" * 2,  # uid, gid: 0
                len(data),
            )
            # The checksum field's last byte (a space), then type to the end.
            self.tail = (
                b" " + kind + link.encode("ascii").ljust(_NAME_MAX, b"\0") + tarfile.POSIX_MAGIC
            ).ljust(_BLOCK - 155, b"\0")
            # The checksum is the byte sum of the header with its own field as
            # spaces: everything but the mtime field is summed once, here.
            self.base = sum(self.head) + 7 * 0x20 + sum(self.tail)

    def info(self, mtime: int) -> tarfile.TarInfo:
        """The header fields: owner 0/0, no names, `mtime`."""
        info = tarfile.TarInfo(self.name)
        info.type = self.kind
        info.mode = self.perm
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = mtime
        info.size = len(self.data)
        info.linkname = self.link
        return info

    def nbytes(self) -> int:
        """About what keeping this entry costs in memory."""
        return len(self.data) + len(self.head) + len(self.tail) + 200


def tar_entry(name: str, kind: bytes, perm: int, data: bytes = b"", link: str = "") -> TarEntry:
    return TarEntry(name, kind, perm, data, link)


class TarStream:
    """Writes tar members into a byte stream exactly as `tarfile` would in PAX format.

    Small writes are gathered into chunks of about `_CHUNK` bytes: each write into the
    gzip layer is one call into the compressor, and three per file (header, content,
    padding) cost more than the deflate itself with ISA-L.
    """

    def __init__(self, out: _Writable) -> None:
        self._out = out
        self._offset = 0
        self._pending = bytearray()
        self._mtime = -1
        self._mtime_field = b""
        self._mtime_sum = 0

    def add(self, info: tarfile.TarInfo, data: bytes = b"") -> None:
        """One member: its header, then `data` padded to a whole block."""
        header = _ustar_header(info) or info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        self._write(header)
        if data:
            self._write(data)
            tail = len(data) % _BLOCK
            if tail:
                self._write(b"\0" * (_BLOCK - tail))

    def entry(self, entry: TarEntry, mtime: int) -> None:
        """`entry` with `mtime`: the same bytes as `add(entry.info(mtime), entry.data)`,
        in the same writes (so the same chunks reach the compressor)."""
        if entry.head and 0 <= mtime < _MTIME_MAX:
            if mtime != self._mtime:
                self._mtime = mtime
                self._mtime_field = b"%011o\0" % mtime
                self._mtime_sum = sum(self._mtime_field)
            checksum = b"%06o\0" % (entry.base + self._mtime_sum)
            header = entry.head + self._mtime_field + checksum + entry.tail
        else:
            header = entry.info(mtime).tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        data = entry.data
        pad = -len(data) % _BLOCK
        pending = self._pending
        if len(pending) + len(header) + len(data) + pad < _CHUNK:
            # No flush inside this member: what the three `_write`s below would do
            # (a replayed directory is thousands of these).
            pending += header
            pending += data
            pending += _ZEROS[:pad]
            self._offset += len(header) + len(data) + pad
            return
        self._write(header)
        if data:
            self._write(data)
            if pad:
                self._write(_ZEROS[:pad])

    def close(self) -> None:
        """Two zero blocks end the archive; then zeros up to a whole record (as tarfile)."""
        self._write(b"\0" * (2 * _BLOCK))
        tail = self._offset % _RECORD
        if tail:
            self._write(b"\0" * (_RECORD - tail))
        self._flush()

    def _write(self, data: bytes) -> None:
        self._offset += len(data)
        if len(data) >= _CHUNK:
            self._flush()
            self._out.write(data)
            return
        self._pending += data
        if len(self._pending) >= _CHUNK:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._out.write(bytes(self._pending))
            self._pending.clear()


def _ustar_header(info: tarfile.TarInfo) -> bytes | None:
    """The header tarfile's PAX format writes for a plain entry, or None to let it decide.

    PAX format writes a plain ustar header (no extended record) when every field fits:
    ASCII name and link target of at most 100 bytes, empty user and group names, and
    numbers that fit their octal fields. Only such entries are written here.
    """
    name, link = info.name, info.linkname
    if not (name.isascii() and link.isascii()) or info.uname or info.gname:
        return None
    if len(name) > _NAME_MAX or len(link) > _NAME_MAX:
        return None
    if info.type not in (tarfile.REGTYPE, tarfile.SYMTYPE):
        return None
    size, mtime = info.size, info.mtime
    if not (isinstance(mtime, int) and 0 <= mtime < _MTIME_MAX and 0 <= size < _SIZE_MAX):
        return None
    if not (0 <= info.uid < 8**7 and 0 <= info.gid < 8**7):
        return None
    head = b"".join(
        [
            name.encode("ascii").ljust(_NAME_MAX, b"\0"),
            b"%07o\0" % (info.mode & 0o7777),
            b"%07o\0" % info.uid,
            b"%07o\0" % info.gid,
            b"%011o\0" % size,
            b"%011o\0" % mtime,
            b"        ",  # the checksum field counts as spaces while summing
            info.type,
            link.encode("ascii").ljust(_NAME_MAX, b"\0"),
            tarfile.POSIX_MAGIC,
            b"\0" * 32,  # uname
            b"\0" * 32,  # gname
            b"\0" * 8,  # devmajor: only character and block devices carry them
            b"\0" * 8,  # devminor
            b"\0" * 155,  # prefix: unused in PAX format
        ]
    ).ljust(_BLOCK, b"\0")
    checksum = sum(head)
    return head[:148] + b"%06o\0" % checksum + head[155:]

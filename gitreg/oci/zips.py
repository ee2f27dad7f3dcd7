"""A module archive (`.tar.gz`) rewritten as the `.zip` an OCI module layer is.

The zip holds the same tree as the registry archive: the same entries in the
same order, regular files 0644 or 0755, directories 0755, symlinks kept as
symlinks (the archive builder only admits links that stay inside the tree).
Everything that could vary is fixed: every entry's time is 1980-01-01 00:00 (the
zip epoch), the creator is Unix, there is no extra field or comment, and files
are deflated with zlib at level 6. Deflate output is promised only for one zlib
version, which is why a zip is built once, stored under its sha256 with the
builder's name, and never rebuilt.
"""

from __future__ import annotations

import shutil
import stat
import tarfile
import zipfile
from typing import BinaryIO

BUILDER = "zip+zlib-6"
_EPOCH = (1980, 1, 1, 0, 0, 0)
_UNIX = 3
_CHUNK = 256 * 1024


def _info(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.create_system = _UNIX
    info.external_attr = mode << 16
    if stat.S_ISDIR(mode):
        info.external_attr |= 0x10  # MS-DOS directory bit, as zip(1) sets it
    return info


def tar_to_zip(archive: BinaryIO, out: BinaryIO) -> None:
    """Write the zip of the `.tar.gz` read from `archive` into `out`, which must
    be seekable (the central directory then carries sizes, not data descriptors)."""
    with (
        tarfile.open(fileobj=archive, mode="r:gz") as tar,
        zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf,
    ):
        for member in tar:
            name = member.name.lstrip("/")
            if name.startswith("./"):
                name = name[2:]
            if not name or name == ".":
                continue
            if member.isdir():
                zf.writestr(_info(name.rstrip("/") + "/", stat.S_IFDIR | 0o755), b"")
            elif member.issym():
                info = _info(name, stat.S_IFLNK | 0o777)
                zf.writestr(info, member.linkname.encode(), compress_type=zipfile.ZIP_STORED)
            elif member.isfile():
                perm = 0o755 if member.mode & 0o111 else 0o644
                info = _info(name, stat.S_IFREG | perm)
                info.compress_type = zipfile.ZIP_DEFLATED
                source = tar.extractfile(member)
                assert source is not None  # a regular file always has content
                with source, zf.open(info, "w") as sink:
                    shutil.copyfileobj(source, sink, _CHUNK)
            # Nothing else (devices, fifos, hard links) is ever in a module archive.

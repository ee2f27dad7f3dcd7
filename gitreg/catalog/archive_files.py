"""Files of a module version, read from its stored archive: what a README's
relative images and links open, and an example's configuration.

The archive is the `.tar.gz` every download serves (gitreg/archives/build.py:
safe names, no `.git`, regular files and contained symlinks only), so what
is shown is exactly what `terraform init` installs. It is read as a stream,
member after member, with bounds on what one request can cost: at most
MAX_SCAN_BYTES of members are decompressed to find a file and a file over
MAX_FILE_BYTES is reported by its size rather than read. Files read are kept
by (archive, path) in a small cache: a README's images are asked for on every
view of the page.
"""

from __future__ import annotations

import posixpath
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from gitreg.catalog.lru import SizedLru

MAX_FILE_BYTES = 2 * 1024 * 1024  # a larger file is listed by its size, never read
MAX_SCAN_BYTES = 256 * 1024 * 1024  # members decompressed to find what was asked
MAX_FILES = 200  # files one request may read (an example's .tf files)
CACHE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ArchiveFile:
    """A regular file of the archive, by its path inside the module; `data`
    is None when it is over MAX_FILE_BYTES."""

    path: str
    size: int
    data: bytes | None


class FileCache(SizedLru[tuple[str, str], ArchiveFile]):
    """ArchiveFile by (archive sha256, what was asked); an archive never changes."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        super().__init__(max_bytes, 8, lambda f: len(f.data or b"") + 64)


def clean_path(path: str) -> str | None:
    """A path inside the module as a request names it, or None when it is
    not one (absolute, `..`, empty parts, control characters)."""
    if not path or path.startswith("/") or "\\" in path or any(ord(c) < 0x20 for c in path):
        return None
    normal = posixpath.normpath(path)
    if normal != path.rstrip("/") or normal in (".", "..") or normal.startswith("../"):
        return None
    return normal


def read_files(
    raw: BinaryIO, subdir: str, wanted: Callable[[str], bool], most: int = MAX_FILES
) -> list[ArchiveFile]:
    """The regular files of the archive stream `raw` whose path inside the
    module (below `subdir`) `wanted` accepts, in archive order, at most `most`."""
    prefix = f"{subdir}/" if subdir else ""
    found: list[ArchiveFile] = []
    scanned = 0
    with tarfile.open(fileobj=raw, mode="r|gz") as tar:
        for member in tar:
            scanned += member.size
            if scanned > MAX_SCAN_BYTES or len(found) >= most:
                break
            name = member.name
            if not member.isfile() or not name.startswith(prefix):
                continue
            inside = name[len(prefix) :]
            if not wanted(inside):
                continue
            data = None
            if member.size <= MAX_FILE_BYTES:
                stream = tar.extractfile(member)
                data = stream.read(MAX_FILE_BYTES + 1) if stream is not None else b""
            found.append(ArchiveFile(inside, member.size, data))
    return found

"""The `h1:` directory hash of a module archive: Go's dirhash Hash1, the hash
Terraform records for providers in `.terraform.lock.hcl` (docs/verify.md).

Hash1 lists every file as `<hex sha256 of its content>  <slash path>\n`, in
byte order of the path, and is `h1:` and the base64 of the SHA-256 of that
list. The files are those Terraform leaves when it extracts a module archive:
regular files, and symlinks that lead to a regular file, hashed as the content
they lead to (as Go's dirhash reads through them). A symlink to a directory,
or one that leads nowhere, is not a file and is left out. The same rule gives
the same hash from the entries an archive build writes (`EntryHasher`, fed by
gitreg/archives/build.py, so publishing reads nothing twice), from an archive's
bytes (`archive_dirhash`) and from the directory Terraform extracted it to
(`tree_dirhash`, what `gitreg verify` computes).
"""

from __future__ import annotations

import base64
import hashlib
import os
import posixpath
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from gitreg.archives.entries import open_tar

_CHUNK = 1 << 16
_MAX_LINKS = 40  # symlink hops followed inside an archive, as an OS allows


def hash1(files: Iterable[tuple[str, str]]) -> str:
    """`h1:` over (slash path, hex sha256) pairs; a path with a newline cannot
    be listed unambiguously and is refused, as Go refuses it."""
    summary = hashlib.sha256()
    for name, digest in sorted(files, key=lambda item: item[0].encode()):
        if "\n" in name:
            raise ValueError(f"file name with a newline: {name!r}")
        summary.update(f"{digest}  {name}\n".encode())
    return "h1:" + base64.b64encode(summary.digest()).decode()


def tree_files(root: Path) -> dict[str, str]:
    """Slash path -> hex sha256 of every file under `root`, by the rule above."""
    found: dict[str, str] = {}
    pending = [("", str(root))]
    while pending:
        prefix, folder = pending.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                name = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    pending.append((name + "/", entry.path))
                elif entry.is_file(follow_symlinks=False) or (
                    entry.is_symlink() and os.path.isfile(entry.path)
                ):
                    found[name] = _file_sha256(entry.path)
    return found


def _file_sha256(path: str) -> str:
    """Plain reads: `hashlib.file_digest` zeroes a 256 KiB buffer for every
    file, more than hashing a small .tf file costs."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY)
    try:
        while chunk := os.read(fd, _CHUNK):
            digest.update(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest()


def tree_dirhash(root: Path) -> str:
    return hash1(tree_files(root).items())


class EntryHasher:
    """The `h1:` of an archive from its entries as they are written."""

    def __init__(self) -> None:
        self._contents: dict[str, str] = {}
        self._links: dict[str, str] = {}

    def file(self, name: str, digest: str) -> None:
        self._contents[name] = digest

    def link(self, name: str, target: str) -> None:
        self._links[name] = target

    def files(self) -> dict[str, str]:
        return _with_links(self._contents, self._links)

    def result(self) -> str:
        return hash1(self.files().items())


def _with_links(contents: dict[str, str], links: dict[str, str]) -> dict[str, str]:
    files = dict(contents)
    for name in links:
        target = _resolve(name, links, contents)
        if target is not None:
            files[name] = contents[target]
    return files


def archive_files(archive: BinaryIO) -> dict[str, str]:
    """Slash path -> hex sha256 of every file a tar.gz module archive extracts to."""
    contents: dict[str, str] = {}
    links: dict[str, str] = {}
    with open_tar(mode="r:gz", fileobj=archive) as tar:
        for member in tar:
            name = posixpath.normpath(member.name.lstrip("/"))
            if name in (".", "") or name.startswith("../"):
                continue
            if member.isreg():
                handle = tar.extractfile(member)
                assert handle is not None
                digest = hashlib.sha256()
                while chunk := handle.read(_CHUNK):
                    digest.update(chunk)
                contents[name] = digest.hexdigest()
            elif member.issym():
                links[name] = member.linkname
    return _with_links(contents, links)


def _resolve(name: str, links: dict[str, str], contents: dict[str, str]) -> str | None:
    """The regular file a symlink leads to within the archive, or None."""
    current = name
    for _ in range(_MAX_LINKS):
        if current in contents:
            return current
        if current not in links:
            return None
        target = links[current]
        if target.startswith("/"):
            return None
        current = posixpath.normpath(posixpath.join(posixpath.dirname(current), target))
        if current.startswith("../") or current == "..":
            return None
    return None


def archive_dirhash(archive: BinaryIO) -> str:
    return hash1(archive_files(archive).items())

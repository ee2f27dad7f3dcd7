"""A module location that is a plain archive (`https://.../x.tar.gz`, `?archive=zip`).

The downloaded archive is never handed to Terraform as is: its entries become
git objects in a temporary bare repository, and the tree is archived by
`build_archive`, the builder of gitreg's own modules. So the same
rules hold as for a git source: no `.git`, no symlink leaving the tree, no
entry names like `../x`, capped size and file count, deterministic bytes.
Every entry counts toward `max_archive_files`, directories and entries that
are left out (hard links, devices, FIFOs) included, and those left out are
reported in one line (gitreg/archives/entries.py). Sizes are checked
against the archive limits while unpacking, before any content is read, so a
zip bomb stops early.
"""

from __future__ import annotations

import contextlib
import hashlib
import stat
import tarfile
import zipfile
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO, cast

from dulwich.objects import Blob, ObjectID, Tree
from dulwich.repo import Repo

from gitreg.archives.build import build_archive
from gitreg.archives.entries import EntryCounter, open_tar, open_zip
from gitreg.errors import ArchiveTooLarge, UpstreamError
from gitreg.module_proxy.fetch import FetchedArchive, FetchLimits
from gitreg.storage.blobs import BlobStore

_FILE, _EXEC, _LINK, _DIR = 0o100644, 0o100755, 0o120000, 0o040000


@dataclass
class _Dir:
    entries: dict[bytes, tuple[int, ObjectID]] = field(default_factory=dict)
    dirs: dict[bytes, _Dir] = field(default_factory=dict)


_KINDS = {
    tarfile.LNKTYPE: "hard link",
    tarfile.CHRTYPE: "character device",
    tarfile.BLKTYPE: "block device",
    tarfile.FIFOTYPE: "FIFO",
}


def _members(
    path: Path, kind: str, entries: EntryCounter
) -> Generator[tuple[str, int, int, IO[bytes] | bytes]]:
    """(name, git mode, size, content) of each file and symlink. Every entry is
    counted first, whatever its kind; what is left out is tallied there."""
    if kind == "zip":
        with open_zip(path, entries.limit) as archive:
            for info in archive.infolist():
                entries.count()
                if info.is_dir():
                    continue
                mode = info.external_attr >> 16
                git_mode = _LINK if stat.S_ISLNK(mode) else _EXEC if mode & 0o111 else _FILE
                # Opened, not read: sizes are checked before a byte is unpacked.
                with archive.open(info) as opened:
                    yield info.filename, git_mode, info.file_size, opened
        return
    with open_tar(path) as archive:
        for member in archive:
            entries.count()
            if member.isdir():
                continue
            if member.issym():
                yield member.name, _LINK, len(member.linkname), member.linkname.encode()
            elif member.isfile():
                git_mode = _EXEC if member.mode & 0o111 else _FILE
                content = archive.extractfile(member)
                assert content is not None  # a regular file always has content
                yield member.name, git_mode, member.size, content
            else:
                entries.leave_out(member.name, _KINDS.get(member.type, f"type {member.type!r}"))


def _tree(repo: Repo, path: Path, kind: str, limits: FetchLimits, entries: EntryCounter) -> bytes:
    root = _Dir()
    total = 0
    # Closed here when a limit stops the walk, the entry open at the time with it,
    # not later by the garbage collector.
    with contextlib.closing(_members(path, kind, entries)) as members:
        for name, mode, size, content in members:
            total += size
            if total > limits.archive.max_total_bytes:
                raise ArchiveTooLarge(
                    f"the archive unpacks to more than {limits.archive.max_total_bytes} bytes"
                )
            if size > limits.archive.max_file_bytes:
                raise ArchiveTooLarge(f"{name[:200]} is over {limits.archive.max_file_bytes} bytes")
            data = content if isinstance(content, bytes) else content.read(size + 1)
            if len(data) > size:  # a header that understates its entry (a bomb)
                raise ArchiveTooLarge(f"{name[:200]} is larger than its header says")
            blob = Blob.from_string(data)
            repo.object_store.add_object(blob)
            parts = [p.encode() for p in name.split("/") if p not in ("", ".")]
            if not parts:
                continue
            here = root
            for part in parts[:-1]:
                here = here.dirs.setdefault(part, _Dir())
            # Names such as `..` are kept here so build_archive refuses and reports them.
            here.entries[parts[-1]] = (mode, blob.id)
    return bytes(_store(repo, root))


def _store(repo: Repo, directory: _Dir) -> ObjectID:
    tree = Tree()
    for name, (mode, sha) in directory.entries.items():
        tree.add(name, mode, sha)
    for name, sub in directory.dirs.items():
        tree.add(name, _DIR, _store(repo, sub))
    repo.object_store.add_object(tree)
    return tree.id


def archive_from_download(
    downloaded: Path, kind: str, blobs: BlobStore, limits: FetchLimits, repo_dir: Path
) -> FetchedArchive:
    """Blocking: rebuild `downloaded` with gitreg's archive builder and store it.
    The record's commit is `sha256:` + the downloaded file's digest, so a later
    check can tell whether the upstream still serves the same bytes."""
    digest = hashlib.sha256()
    with downloaded.open("rb") as raw:
        while chunk := raw.read(1024 * 1024):
            digest.update(chunk)
    entries = EntryCounter(limits.archive.max_files)
    repo = Repo.init_bare(str(repo_dir), mkdir=True)
    try:
        try:
            tree = _tree(repo, downloaded, kind, limits, entries)
        except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
            raise UpstreamError(f"the archive cannot be read: {exc}") from exc
        except ArchiveTooLarge as exc:
            raise UpstreamError(str(exc)) from exc
        try:
            with blobs.writer() as sink:
                # No commit time: mtime 0 keeps the rebuilt archive deterministic.
                report = build_archive(
                    repo.object_store, tree, cast(BinaryIO, sink), mtime=0, limits=limits.archive
                )
        except ArchiveTooLarge as exc:
            raise UpstreamError(str(exc)) from exc
    finally:
        repo.close()
    assert sink.result is not None
    summary = entries.summary()
    skipped = ((summary,) if summary else ()) + tuple(report.skipped)
    return FetchedArchive(
        f"sha256:{digest.hexdigest()}", sink.result.sha256, sink.result.size, skipped
    )

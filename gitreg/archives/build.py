"""Build a module's `.tar.gz` straight from git objects, safely and reproducibly.

Archives are made from the object store, never from a checkout, so nothing on the host is
ever followed or read. Every entry is checked before it is written:

- names that could escape or poison the extraction directory (absolute, `..`, `\\`, NUL,
  control characters, `.git` in any case or NTFS/HFS+ disguise) are dropped;
- symlinks are kept only if they provably stay inside the archive root;
- submodules (gitlinks) and `.git` content are left out;
- modes are 0644/0755, owner 0/0 with no names;
- entries are sorted and every header field is fixed, so one tree always yields the same
  bytes, which is what lets an archive be stored once under its sha256;
- limits on file count, file size, total size and path length stop the build.

Every dropped entry is reported as a `"path: reason"` line so the publisher can see why.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import tarfile
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol, TypeVar

from dulwich.objects import Blob, ObjectID, ShaFile, Tree, TreeEntry

from gitreg.archives.cache import DirRecord, SubtreeCache
from gitreg.archives.dirhash import EntryHasher
from gitreg.archives.format import CLASSIC, TarEntry, TarStream, gzip_writer, tar_entry
from gitreg.errors import ArchiveTooLarge

__all__ = ["ArchiveLimits", "ArchiveReport", "build_archive"]

# Git's file-type bits (the `S_IFMT` part of a tree entry's mode).
_S_IFMT = 0o170000
_S_IFDIR = 0o040000
_S_IFREG = 0o100000
_S_IFLNK = 0o120000
_S_IFGITLINK = 0o160000
_GIT_EXECUTABLE = 0o100755

_T = TypeVar("_T", bound=ShaFile)

# Everything that could vary between builds is pinned here and in
# gitreg/archives/format.py (the tar format, and the gzip layer named by a builder).

# Code points HFS+ ignores when comparing names, so `.git\u200c` *is* `.git` on a Mac.
# The same list as git's `is_hfs_dotgit` (utf8.c, CVE-2014-9390).
_HFS_IGNORABLE = dict.fromkeys(
    [0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)
# What NTFS treats as `.git`: trailing dots/spaces are ignored, `git~N` is the 8.3 short
# name, and `.git::$INDEX_ALLOCATION` (anything after `:`) names a stream of the directory.
# Git's `is_ntfs_dotgit` only checks `git~1`; any `~N` is refused here to be safe.
_NTFS_DOTGIT = re.compile(r"(?:\.git|git~[0-9]+)[. ]*(?::.*)?", re.DOTALL)


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps that stop a hostile or mistaken tree from filling the disk."""

    max_total_bytes: int = 256 * 1024 * 1024  # sum of file sizes
    max_files: int = 20_000
    max_file_bytes: int = 64 * 1024 * 1024
    max_path_length: int = 1024


@dataclass
class ArchiveReport:
    """What went into an archive and what was left out (left-out entries are reported)."""

    files: int = 0  # regular files + symlinks written
    total_bytes: int = 0  # uncompressed content bytes
    skipped: list[str] = field(default_factory=list)  # "path: reason" for each dropped entry
    dir_hash: str = ""  # `h1:` of the files as extracted (gitreg/archives/dirhash.py)


class ObjectSource(Protocol):
    """The one thing needed from a dulwich object store: objects by hex sha.

    Any `dulwich.object_store.BaseObjectStore` (e.g. `Repo(path).object_store`) fits.
    """

    def __getitem__(self, sha: ObjectID, /) -> ShaFile: ...


def build_archive(
    object_store: ObjectSource,
    tree_id: bytes,
    out: BinaryIO,
    *,
    mtime: int,
    limits: ArchiveLimits = ArchiveLimits(),  # frozen, so one shared default is safe
    builder: str = CLASSIC,
    prefix: str = "",
    cache: SubtreeCache | None = None,
) -> ArchiveReport:
    """Write the tree `tree_id` as a deterministic `.tar.gz` to `out` and report on it.

    The same tree, mtime and `builder` (gitreg/archives/format.py) always give the same
    bytes. The gzip stream is written incrementally and blobs are read one at a
    time, so memory stays around one file's size. On `ArchiveTooLarge` (or a dulwich
    error for a corrupt or missing object) `out` holds a partial stream that the caller
    must discard. With `prefix` (a checked subdirectory path) every entry
    is written under it: the archive of one directory of a monorepo, at its place.
    With `cache` (gitreg/archives/cache.py), directories an earlier build walked are
    written from it, and this build's directories are kept for the next: the same
    bytes, with memory bounded by the cache instead of one file.
    """
    report = ArchiveReport()
    root = _load(object_store, ObjectID(tree_id), Tree)
    if root is None:
        raise ValueError(f"{tree_id!r} is not a tree object")
    cache = cache if cache is not None else SubtreeCache(0)
    cache.start(limits)
    writer: _Writer | None = None
    try:
        with gzip_writer(out, builder) as gz:
            tar = TarStream(gz)
            writer = _Writer(object_store, tar, mtime, limits, report, cache)
            start = prefix.encode("utf-8") + b"/" if prefix else b""
            _Walk(object_store, writer, limits, report, cache).run(tree_id, root, start)
            tar.close()
            report.dir_hash = writer.hasher.result()
    finally:
        cache.finish(writer.written if writer is not None else [])
    return report


# --- Walking the tree -------------------------------------------------------------------


@dataclass
class _Frame:
    """A directory being walked, and where its part of the build began."""

    sha: bytes
    prefix: bytes  # its path with a trailing `/` ("" for the root)
    entries: Iterator[TreeEntry]
    first_entry: int
    first_dir: int
    first_skipped: int
    files: int
    total_bytes: int
    nbytes: int


class _Walk:
    """Every non-directory entry with a safe path, in full-path byte order.

    Iterative (an explicit stack of directory iterators), so deep trees cannot exhaust
    Python's recursion limit; depth is bounded anyway by `max_path_length`.
    Unsafe names and non-tree "directories" are reported and not descended into.
    A directory in the cache is written from it, unless it would cross `max_files`
    or `max_total_bytes`: then it is walked, so the error names the same path.
    """

    def __init__(
        self,
        store: ObjectSource,
        writer: _Writer,
        limits: ArchiveLimits,
        report: ArchiveReport,
        cache: SubtreeCache,
    ) -> None:
        self._store, self._writer, self._limits = store, writer, limits
        self._report, self._cache = report, cache
        self._dirs: list[tuple[bytes, bytes]] = []  # directories written, in order

    def run(self, sha: bytes, root: Tree, start: bytes) -> None:
        if self._replay(sha, start):
            return
        stack = [self._frame(sha, start, root)]
        while stack:
            frame = stack[-1]
            entry = next(frame.entries, None)
            if entry is None:
                self._keep(stack.pop())
                continue
            name, mode, sha = entry
            path = frame.prefix + name
            # The entry's own name is checked, never a component re-split from `path`: a
            # name like `/etc/passwd` or `../x` must be refused as a whole.
            reason = unsafe_name_reason(name)
            if reason is not None:
                if mode & _S_IFMT == _S_IFDIR:
                    reason += " (directory and everything under it left out)"
                self._report.skipped.append(f"{_display(path)}: {reason}")
                continue
            _check_limit("max_path_length", len(path), self._limits.max_path_length, path)
            if mode & _S_IFMT != _S_IFDIR:
                self._writer.add(path, mode, sha)
            elif not self._replay(sha, path + b"/"):
                subtree = _load(self._store, sha, Tree)
                if subtree is None:
                    self._report.skipped.append(
                        f"{_display(path)}: directory entry is not a tree object"
                    )
                    continue
                stack.append(self._frame(sha, path + b"/", subtree))

    def _frame(self, sha: bytes, prefix: bytes, tree: Tree) -> _Frame:
        report, written = self._report, self._writer.written
        return _Frame(
            sha,
            prefix,
            _children(tree),
            len(written),
            len(self._dirs),
            len(report.skipped),
            report.files,
            report.total_bytes,
            self._writer.nbytes,
        )

    def _keep(self, frame: _Frame) -> None:
        """A directory's walk ended: keep what it added, for the next build."""
        if not self._cache.recording():
            return
        report, writer = self._report, self._writer
        record = DirRecord(
            tuple(writer.written[frame.first_entry :]),
            tuple(report.skipped[frame.first_skipped :]),
            report.files - frame.files,
            report.total_bytes - frame.total_bytes,
            writer.nbytes - frame.nbytes,
            tuple(self._dirs[frame.first_dir :]),
        )
        self._cache.put(frame.sha, frame.prefix, record)
        self._dirs.append((frame.sha, frame.prefix))

    def _replay(self, sha: bytes, prefix: bytes) -> bool:
        """Write a cached directory; False if it is not cached or would cross a limit."""
        record = self._cache.get(sha, prefix)
        if record is None:
            return False
        report, limits = self._report, self._limits
        if (
            report.files + record.files > limits.max_files
            or report.total_bytes + record.total_bytes > limits.max_total_bytes
        ):
            return False
        self._writer.replay(record)
        self._dirs += record.below
        self._dirs.append((sha, prefix))
        report.files += record.files
        report.total_bytes += record.total_bytes
        report.skipped.extend(record.skipped)
        return True


def _children(tree: Tree) -> Iterator[TreeEntry]:
    """A directory's entries ordered so a depth-first walk visits full paths in byte order.

    Sorting plain names would put `a/b` before `a-c` although `"a-c" < "a/b"`; keying a
    subdirectory as `name + "/"` (git's own tree order) gives true full-path order.
    """
    return iter(
        sorted(
            tree.iteritems(),
            key=lambda e: e.path + b"/" if e.mode & _S_IFMT == _S_IFDIR else e.path,
        )
    )


def _load(store: ObjectSource, sha: ObjectID, kind: type[_T]) -> _T | None:
    """Fetch an object, or None if it is not of the kind its tree entry's mode promises."""
    obj = store[sha]
    return obj if isinstance(obj, kind) else None


# --- Writing entries --------------------------------------------------------------------


class _Writer:
    """Turns checked tree entries into tar members with fixed metadata."""

    def __init__(
        self,
        store: ObjectSource,
        tar: TarStream,
        mtime: int,
        limits: ArchiveLimits,
        report: ArchiveReport,
        cache: SubtreeCache,
    ) -> None:
        self._store = store
        self._tar = tar
        self._mtime = mtime
        self._limits = limits
        self._report = report
        self._cache = cache
        self.written: list[TarEntry] = []  # while the cache records: what was written
        self.nbytes = 0  # what `written` costs in memory
        self.hasher = EntryHasher()

    def _hash(self, entry: TarEntry) -> None:
        if entry.kind == tarfile.SYMTYPE:
            self.hasher.link(entry.name, entry.link)
        elif entry.kind == tarfile.REGTYPE:
            if not entry.digest:  # a cached entry keeps it for the next build
                entry.digest = hashlib.sha256(entry.data).hexdigest()
            self.hasher.file(entry.name, entry.digest)

    def replay(self, record: DirRecord) -> None:
        """Write a directory's entries as an earlier build wrote them (same calls)."""
        tar, mtime = self._tar, self._mtime
        for entry in record.entries:
            tar.entry(entry, mtime)
            self._hash(entry)
        self._cache.count(record.nbytes)
        if self._cache.recording():
            self.written.extend(record.entries)
            self.nbytes += record.nbytes

    def _emit(self, entry: TarEntry) -> None:
        self._tar.entry(entry, self._mtime)
        self._hash(entry)
        size = entry.nbytes()
        self._cache.count(size)
        if self._cache.recording():
            self.written.append(entry)
            self.nbytes += size

    def add(self, path: bytes, mode: int, sha: ObjectID) -> None:
        """Write one non-directory entry, or report why it is left out."""
        kind = mode & _S_IFMT
        if kind == _S_IFGITLINK:
            self._skip(path, "submodule (gitlink) not included")
        elif kind == _S_IFLNK:
            self._add_symlink(path, sha)
        elif kind == _S_IFREG:
            self._add_file(path, 0o755 if mode == _GIT_EXECUTABLE else 0o644, sha)
        else:
            self._skip(path, f"unsupported git mode {mode:06o}")

    def _add_file(self, path: bytes, perm: int, sha: ObjectID) -> None:
        """Write a regular file, only 0644/0755, so setuid/setgid/sticky never survive."""
        key = (sha, path, perm)
        entry = self._cache.file(key)
        if entry is None:
            blob = _load(self._store, sha, Blob)
            if blob is None:
                self._skip(path, "file entry is not a blob")
                return
            # Names were checked to be UTF-8.
            entry = tar_entry(path.decode("utf-8"), tarfile.REGTYPE, perm, blob.as_raw_string())
            entry.key = key
        self._count_file(path)
        size = len(entry.data)
        lim = self._limits
        _check_limit("max_file_bytes", size, lim.max_file_bytes, path)
        _check_limit("max_total_bytes", self._report.total_bytes + size, lim.max_total_bytes, path)
        self._report.total_bytes += size
        self._emit(entry)

    def _add_symlink(self, path: bytes, sha: ObjectID) -> None:
        """Keep a symlink only if its target provably stays inside the archive."""
        blob = _load(self._store, sha, Blob)
        if blob is None:
            self._skip(path, "symlink entry is not a blob")
            return
        _check_limit("max_path_length", blob.raw_length(), self._limits.max_path_length, path)
        target = blob.as_raw_string()
        reason = _symlink_problem(path, target)
        if reason is not None:
            self._skip(path, f"symlink to {_display(target)!r} left out: {reason}")
            return
        self._count_file(path)
        # 0644/0755 only, even here; the header's other fields: TarEntry.info.
        name, link = path.decode("utf-8"), target.decode("utf-8")
        self._emit(tar_entry(name, tarfile.SYMTYPE, 0o755, link=link))

    def _count_file(self, path: bytes) -> None:
        """Count one more written entry, checked before anything of it is written."""
        _check_limit("max_files", self._report.files + 1, self._limits.max_files, path)
        self._report.files += 1

    def _skip(self, path: bytes, reason: str) -> None:
        self._report.skipped.append(f"{_display(path)}: {reason}")


def _check_limit(name: str, value: int, limit: int, path: bytes) -> None:
    """Raise `ArchiveTooLarge` naming the limit, its value and the offending path."""
    if value > limit:
        raise ArchiveTooLarge(
            f"archive limit {name}={limit} exceeded at {_display(path)!r} (would be {value})"
        )


# --- Name and target checks -------------------------------------------------------------


def unsafe_name_reason(name: bytes) -> str | None:
    """Why one path component must not be extracted, or None if it is safe.

    Checked on the raw bytes first (separators, NUL, controls), then as UTF-8 text, because
    tar names are text and a `.git` disguise is only visible after decoding.
    """
    if name in (b"", b".", b".."):
        return f"unsafe name {_display(name)!r}"
    if b"/" in name or b"\\" in name:
        return "name contains a path separator ('/' or '\\')"
    if any(b < 0x20 or b == 0x7F for b in name):
        return "name contains NUL or a control character"
    try:
        text = name.decode("utf-8")
    except UnicodeDecodeError:
        return "name is not valid UTF-8"
    if any(unicodedata.category(ch) == "Cc" for ch in text):
        return "name contains a control character"
    if _is_dotgit(text):
        return "'.git' (or a disguise of it) is never archived"
    return None


def _is_dotgit(name: str) -> bool:
    """True if a filesystem could take `name` for `.git` (git's is_hfs/is_ntfs_dotgit).

    HFS+ ignorable code points are removed first, then the NTFS forms are matched
    case-insensitively. Combining both is stricter than git, which is the safe side.
    `.gitmodules`, `.github` and `.gitignore` do not match.
    """
    folded = name.translate(_HFS_IGNORABLE).lower()
    return _NTFS_DOTGIT.fullmatch(folded) is not None


def _symlink_problem(link_path: bytes, target: bytes) -> str | None:
    """Why a symlink target could point outside the archive root, or None if it cannot.

    `posixpath.normpath` alone is not enough: with `sub/up -> ..`, the target `up/../..`
    normalises to `.` but really resolves through `up` to the parent of the root. So all
    `..` components must come first, and climb no higher than the link's own directory,
    whose ancestors are real directories. Every later component only descends, and any
    symlink met on the way has passed this same check, so resolution stays inside.
    """
    if not target:
        return "empty target"
    if target.startswith(b"/"):
        return "absolute target"
    if b"\0" in target or b"\\" in target:
        return "target contains NUL or a backslash"
    parts = [p for p in target.split(b"/") if p not in (b"", b".")]
    climbs = 0
    while climbs < len(parts) and parts[climbs] == b"..":
        climbs += 1
    names = parts[climbs:]
    if b".." in names:
        return "'..' after a name in the target"
    for part in names:
        if (reason := unsafe_name_reason(part)) is not None:
            return f"target component: {reason}"
    if climbs > link_path.count(b"/"):
        return "target leaves the archive root"
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(link_path), target))
    if resolved == b".." or resolved.startswith((b"../", b"/")):
        return "target leaves the archive root"
    return None


def _display(raw: bytes) -> str:
    """A printable form of a path for reports: bad UTF-8 and control characters escaped."""
    text = raw.decode("utf-8", "backslashreplace")
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)

"""Content-addressed blob store on the local filesystem.

Blobs are stored under their sha256 and never change, so they may be cached
forever. A write goes to a temp file in the same filesystem, is
fsynced, then renamed into place and the directory fsynced: a
crash leaves either the whole blob or nothing under its final name.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from gitreg.errors import NotFound, storage_full
from gitreg.metrics import service as metrics

SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class StoredBlob:
    sha256: str
    size: int


class BlobStore(Protocol):
    """What the rest of gitreg needs from blob storage.

    Blobs are named by the sha256 of their bytes and never change. Code
    outside gitreg/storage/ never sees where a blob lives: a second
    implementation (S3) keeps this contract with no local path except the
    scratch space below, which is local by definition.
    """

    def writer(
        self, check: BlobCheck | None = None
    ) -> contextlib.AbstractContextManager[BlobWriter]:
        """A sink that hashes what is written. On a clean exit the blob is durable
        under its sha256 and `result` is set; writing bytes already stored keeps
        the stored blob (write-once). On an exception nothing is stored. A full
        disk raises `StorageFull`. `check`, if given, is called with the local
        temp file holding every byte and its digest before anything is stored:
        whatever it raises leaves nothing stored (the mirror verifies a zip there,
        so a verified file is renamed into place rather than copied)."""
        ...

    def put_bytes(self, data: bytes) -> StoredBlob:
        """`writer()` for bytes already in memory."""
        ...

    def exists(self, sha256: str) -> bool:
        """True when the blob is stored; False for a malformed name."""
        ...

    def open(self, sha256: str) -> BinaryIO:
        """The blob's bytes, for reading. Raises `NotFound` when it is not stored."""
        ...

    def stat(self, sha256: str) -> StoredBlob:
        """The blob's name and size. Raises `NotFound` when it is not stored."""
        ...

    def delete(self, sha256: str) -> bool:
        """Remove the blob; False when it was not stored (idempotent)."""
        ...

    def local_file(self, sha256: str) -> Path | None:
        """A file on this machine holding the blob, to be sent as is, or None when
        the store keeps its blobs elsewhere (callers then stream `open()`).
        Raises `NotFound` for a malformed name."""
        ...

    def names(self) -> Iterator[str]:
        """The sha256 of every stored blob, in no particular order (for copying
        a whole store, `gitreg migrate-storage`)."""
        ...

    def presigned_url(self, sha256: str, ttl: float) -> str | None:
        """A URL, valid `ttl` seconds, at which anyone can GET the blob's bytes
        without gitreg, or None when the store has no such URLs (local disk)."""
        ...

    def scratch_dir(self, prefix: str) -> contextlib.AbstractContextManager[Path]:
        """A fresh local directory for unpacking, removed on exit."""
        ...

    def scratch_file(self, prefix: str) -> contextlib.AbstractContextManager[Path]:
        """A fresh empty local file for a download in progress, removed on exit."""
        ...

    def check_writable(self, probe_bytes: int = 0) -> None:
        """Raise `OSError` unless a write of `probe_bytes` (made durable) succeeds
        now: the readiness probe (/readyz)."""
        ...

    def backup(self, dest: Path) -> int:
        """Copy into the local directory `dest`, laid out so a blob store there
        serves them, the blobs `dest` lacks; how many were copied."""
        ...

    def remove_stale_temp_files(self, older_than: float = 3600.0) -> int:
        """Remove leftovers of crashed writers older than `older_than` seconds that
        no live writer holds; the number removed."""
        ...


BlobCheck = Callable[[Path, StoredBlob], None]  # see BlobStore.writer


class BlobWriter:
    """A file-like sink that hashes what is written; `result` is set on success."""

    def __init__(self, fileobj: BinaryIO) -> None:
        self._file = fileobj
        self._hash = hashlib.sha256()
        self._size = 0
        self._shared = False  # a reader_fd was handed out
        self.result: StoredBlob | None = None

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._hash.update(data)
        self._size += len(data)
        written = self._file.write(data)
        if self._shared:
            self._file.flush()  # a reader of `reader_fd` may read up to here now
        return written

    def flush(self) -> None:
        self._file.flush()

    def writable(self) -> bool:
        return True

    def digest(self) -> StoredBlob:
        return StoredBlob(self._hash.hexdigest(), self._size)

    def reader_fd(self) -> int:
        """A new descriptor of the temp file, for reading what was written so far
        (with pread) while writing goes on; the caller closes it. It stays valid
        after the writer ends: the mirror streams a cold miss from it.
        From then on every write is flushed to the file before it returns."""
        self._file.flush()
        self._shared = True
        return os.dup(self._file.fileno())


class LocalScratch:
    """Scratch space on this machine, under `_tmp`: every blob store has it,
    wherever its blobs live (the protocol's `scratch_dir`/`scratch_file`)."""

    _tmp: Path

    @contextlib.contextmanager
    def scratch_dir(self, prefix: str) -> Iterator[Path]:
        with tempfile.TemporaryDirectory(dir=self._tmp, prefix=prefix) as tmp:
            yield Path(tmp)

    @contextlib.contextmanager
    def scratch_file(self, prefix: str) -> Iterator[Path]:
        fd, name = tempfile.mkstemp(dir=self._tmp, prefix=prefix)
        os.close(fd)
        path = Path(name)
        try:
            yield path
        finally:
            path.unlink(missing_ok=True)


class FileBlobStore(LocalScratch):
    """Blobs at `<root>/sha256/ab/abcdef...`; temp files at `<root>/tmp`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._tmp = root / "tmp"
        self._tmp.mkdir(parents=True, exist_ok=True)
        (root / "sha256").mkdir(exist_ok=True)

    def path(self, sha256: str) -> Path:
        if not SHA256_RE.match(sha256):
            raise NotFound("no such blob")
        return self.root / "sha256" / sha256[:2] / sha256

    def exists(self, sha256: str) -> bool:
        return SHA256_RE.match(sha256) is not None and self.path(sha256).is_file()

    def open(self, sha256: str) -> BinaryIO:
        try:
            return self.path(sha256).open("rb")
        except FileNotFoundError as exc:
            raise NotFound("no such blob") from exc

    def stat(self, sha256: str) -> StoredBlob:
        try:
            return StoredBlob(sha256, self.path(sha256).stat().st_size)
        except FileNotFoundError as exc:
            raise NotFound("no such blob") from exc

    def delete(self, sha256: str) -> bool:
        if not SHA256_RE.match(sha256):
            return False
        try:
            self.path(sha256).unlink()
        except FileNotFoundError:
            return False
        fsync_dir(self.path(sha256).parent)
        return True

    def local_file(self, sha256: str) -> Path | None:
        return self.path(sha256)

    def names(self) -> Iterator[str]:
        for path in (self.root / "sha256").glob("??/*"):
            if SHA256_RE.match(path.name) and path.parent.name == path.name[:2]:
                yield path.name

    def presigned_url(self, sha256: str, ttl: float) -> str | None:
        return None  # files on this machine are served by gitreg itself

    def check_writable(self, probe_bytes: int = 0) -> None:
        with tempfile.TemporaryFile(dir=self.root / "tmp") as probe:
            if probe_bytes:
                probe.write(b"\0" * probe_bytes)
                probe.flush()
                os.fsync(probe.fileno())

    @contextlib.contextmanager
    def writer(self, check: BlobCheck | None = None) -> Iterator[BlobWriter]:
        """Yield a writer; on a clean exit the blob is durable under its sha256.
        A full disk raises `StorageFull` and leaves nothing but the removed temp."""
        try:
            with self._write_atomically(check) as sink:
                yield sink
        except OSError as exc:
            if (full := storage_full(exc, str(self.root))) is not None:
                raise full from exc
            raise

    @contextlib.contextmanager
    def _write_atomically(self, check: BlobCheck | None) -> Iterator[BlobWriter]:
        fd, tmp = locked_temp_file(self._tmp)
        try:
            with os.fdopen(fd, "wb") as raw:
                sink = BlobWriter(raw)
                yield sink
                raw.flush()
                stored = sink.digest()
                if check is not None:
                    check(tmp, stored)
                os.fsync(raw.fileno())
                final = self.path(stored.sha256)
                final.parent.mkdir(exist_ok=True)
                if not final.exists():
                    os.chmod(tmp, 0o644)
                    os.replace(tmp, final)
                    fsync_dir(final.parent)
                # else: same content already stored, identical bytes by definition.
            sink.result = stored
            metrics.blob_written(stored.size)
        finally:
            tmp.unlink(missing_ok=True)

    def put_bytes(self, data: bytes) -> StoredBlob:
        with self.writer() as sink:
            sink.write(data)
        assert sink.result is not None
        return sink.result

    def backup(self, dest: Path) -> int:
        return copy_missing_files(self.root, dest)

    def remove_stale_temp_files(self, older_than: float = 3600.0) -> int:
        """Temp files left by a crash are garbage: nothing refers to them. Only
        old ones that no writer holds locked go, since another process may be
        writing one right now."""
        count = 0
        cutoff = time.time() - older_than
        for leftover in self._tmp.glob("blob-*"):
            with contextlib.suppress(OSError):
                if leftover.stat().st_mtime < cutoff and remove_if_unlocked(leftover):
                    count += 1
        return count


def copy_missing_files(source: Path, dest: Path) -> int:
    """Copy the files `dest` lacks (or holds at another size), leaving out a
    top-level `tmp`; how many were copied. Enough for blobs, which never change
    under one name, and for the small key and certificate directories."""
    copied = 0
    for path in source.rglob("*"):
        if not path.is_file() or "tmp" in path.relative_to(source).parts[:1]:
            continue
        target = dest / path.relative_to(source)
        if target.exists() and target.stat().st_size == path.stat().st_size:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        copied += 1
    return copied


def locked_temp_file(directory: Path) -> tuple[int, Path]:
    """A new temp file for a blob being written, and its open descriptor, locked
    until the file is renamed or removed: the temp cleaner skips locked files,
    so a slow live writer never loses its file."""
    fd, name = tempfile.mkstemp(dir=directory, prefix="blob-")
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd, Path(name)


def remove_if_unlocked(path: Path) -> bool:
    """Unlink `path` unless a live writer holds its lock (checked without blocking)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        path.unlink()
        return True
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

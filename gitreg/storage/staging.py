"""Where staged CI uploads live until they are published: the `UploadStore`
protocol and its local-directory implementation.

An upload is a set of named files plus its metadata (`.upload.json`, written
once at creation), kept until it is published or expires. The rules about
which names and sizes are allowed, and the quotas, are the domain's
(gitreg/providers/uploads.py); a store only keeps bytes and says how many it
keeps. The S3 implementation (gitreg/storage/s3_uploads.py) keeps uploads in
the blob store's bucket, so N replicas behind a load balancer share them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from gitreg.errors import BadRequest, NotFound

UPLOAD_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")
META = ".upload.json"


def check_filename(filename: str) -> None:
    """Staged files are flat and never hidden: dot names are the store's own."""
    if not filename or "/" in filename or filename.startswith("."):
        raise BadRequest(f"{filename[:120]!r} cannot be staged")


def new_upload_id() -> str:
    return secrets.token_urlsafe(16)  # 22 characters of UPLOAD_ID's alphabet


def token_of(meta: object) -> int | None:
    """The id of the token that created an upload, from its metadata."""
    token = meta.get("token") if isinstance(meta, dict) else None
    return token if isinstance(token, int) and not isinstance(token, bool) else None


@dataclass(frozen=True)
class StagedUpload:
    """One upload as the cleaner sees it."""

    upload_id: str
    token: int | None
    size: int  # bytes held, files still being received included
    last_write: float  # when a byte was last written to it (epoch seconds)


class IncomingFile(Protocol):
    """One file being received. Its bytes count in `UploadStore.uploads()` as
    they arrive; nothing appears under its name until `commit`."""

    def write(self, data: bytes) -> None: ...

    def commit(self) -> None:
        """Store the file under its name whole, replacing a file of that name."""
        ...

    def abort(self) -> None:
        """Drop what was received; nothing is stored. Idempotent."""
        ...


class UploadStore(Protocol):
    """Staged uploads, shared by every process that uses the same storage."""

    def create(self, meta: dict[str, object]) -> str:
        """A new upload holding `meta` (with the creating token's id under
        "token"); its id, 22 URL-safe characters."""
        ...

    def meta(self, upload_id: str) -> dict[str, object] | None:
        """The upload's metadata; None when there is no such upload (a malformed
        id, never created, published or expired)."""
        ...

    def entries(self, upload_id: str) -> int:
        """How many entries the upload holds, metadata and partial files included."""
        ...

    def uploads(self) -> list[StagedUpload]:
        """Every upload, for the cleaner."""
        ...

    def receive(self, upload_id: str, filename: str) -> IncomingFile:
        """Start receiving `filename` into the upload."""
        ...

    def local_files(self, upload_id: str) -> contextlib.AbstractContextManager[list[Path]]:
        """The upload's complete files as local paths named as uploaded (for
        publishing), valid inside the context."""
        ...

    def remove(self, upload_id: str) -> None:
        """Remove the upload and its files (idempotent)."""
        ...

    def remove_stale(self, ttl: float) -> int:
        """Remove uploads nothing was written to for `ttl` seconds, and leftovers
        of files whose receiving was cut off by a crash; how many uploads went."""
        ...


class LocalIncomingFile:
    """Written to `.<name>.partial` beside the target, renamed when complete,
    so a cut connection leaves no half file under the real name."""

    def __init__(self, directory: Path, filename: str) -> None:
        self._target = directory / filename
        self._partial = directory / f".{filename}.partial"
        self._out: BinaryIO | None = self._partial.open("wb")

    def write(self, data: bytes) -> None:
        assert self._out is not None
        self._out.write(data)

    def commit(self) -> None:
        assert self._out is not None
        self._out.close()
        self._out = None
        os.replace(self._partial, self._target)

    def abort(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
        self._partial.unlink(missing_ok=True)


class LocalUploadStore:
    """`<root>/<id>/` per upload (root is `DATA_DIR/uploads`): the single-machine
    default. Partial files sit beside the complete ones, so a live upload's size
    counts them."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def create(self, meta: dict[str, object]) -> str:
        upload_id = new_upload_id()
        directory = self.root / upload_id
        directory.mkdir(parents=True, mode=0o700)
        (directory / META).write_text(json.dumps(meta))
        return upload_id

    def _directory(self, upload_id: str) -> Path | None:
        return self.root / upload_id if UPLOAD_ID.match(upload_id) else None

    def meta(self, upload_id: str) -> dict[str, object] | None:
        directory = self._directory(upload_id)
        if directory is None:
            return None
        try:
            meta = json.loads((directory / META).read_text())
        except (OSError, ValueError):
            return None
        return meta if isinstance(meta, dict) else None

    def entries(self, upload_id: str) -> int:
        directory = self._directory(upload_id)
        return len(_files_of(directory)) if directory is not None else 0

    def uploads(self) -> list[StagedUpload]:
        found = []
        for directory in self._directories():
            with contextlib.suppress(OSError):  # published or removed meanwhile
                found.append(
                    StagedUpload(
                        directory.name,
                        token_of(self.meta(directory.name)),
                        _size_of(directory),
                        _last_write(directory),
                    )
                )
        return found

    def receive(self, upload_id: str, filename: str) -> IncomingFile:
        directory = self._directory(upload_id)
        if directory is None:
            raise NotFound("no such upload")
        check_filename(filename)
        return LocalIncomingFile(directory, filename)

    @contextlib.contextmanager
    def local_files(self, upload_id: str) -> Iterator[list[Path]]:
        directory = self._directory(upload_id)
        files = _files_of(directory) if directory is not None else []
        yield [p for p in files if not p.name.startswith(".")]

    def remove(self, upload_id: str) -> None:
        directory = self._directory(upload_id)
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)

    def remove_stale(self, ttl: float) -> int:
        cutoff = time.time() - ttl
        count = 0
        for directory in self._directories():
            with contextlib.suppress(OSError):
                if _last_write(directory) < cutoff:
                    shutil.rmtree(directory, ignore_errors=True)
                    count += 1
        return count

    def _directories(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return [p for p in self.root.iterdir() if UPLOAD_ID.match(p.name) and p.is_dir()]


def _files_of(directory: Path) -> list[Path]:
    with contextlib.suppress(OSError):
        return list(directory.iterdir())
    return []


def _size_of(directory: Path) -> int:
    total = 0
    for path in _files_of(directory):
        with contextlib.suppress(OSError):  # published or removed meanwhile
            total += path.stat().st_size
    return total


def _last_write(directory: Path) -> float:
    """An upload is live while any of its files (a partial one growing) changes."""
    latest = directory.stat().st_mtime
    for path in _files_of(directory):
        with contextlib.suppress(OSError):
            latest = max(latest, path.stat().st_mtime)
    return latest

"""Staged CI uploads in the blob store's S3 bucket, shared by every replica.

Behind a load balancer the create, the PUTs and the publish of one upload
reach different replicas, whose data dirs are only caches, so an
upload lives in the bucket: `PREFIX/uploads/<id>/.upload.json` (its metadata,
written once) and `PREFIX/uploads/<id>/<filename>`. Staged files are not
content-addressed blobs and no blob route serves them.

A file being received goes to a locked local temp file under the blob store's
temp dir, and is uploaded only when complete: a single put or a multipart
upload makes the object appear whole or not at all, so a cut connection never
leaves a half object under the final name. Publishing downloads the files into
a local scratch dir and hands that to the usual publish code.

The sizes `uploads()` reports count what the bucket holds (a listing of
`uploads/`) plus the files this process is receiving; the quotas are not
counted from them but from the reservations in the shared index
(gitreg/storage/staged_bytes.py), which every replica sees at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import obstore

from gitreg.errors import NotFound, StorageUnavailable
from gitreg.storage.blobs import remove_if_unlocked
from gitreg.storage.s3 import CHUNK, S3BlobStore, _s3_errors
from gitreg.storage.staging import (
    META,
    UPLOAD_ID,
    IncomingFile,
    StagedUpload,
    check_filename,
    new_upload_id,
    token_of,
)

if TYPE_CHECKING:
    from obstore import ObjectMeta

_KEYS = "uploads"
_TEMP = "upload-"


class S3IncomingFile:
    """A file received into a local temp file, put to S3 on `commit`."""

    def __init__(self, owner: S3UploadStore, upload_id: str, key: str) -> None:
        fd, name = tempfile.mkstemp(dir=owner.blobs.temp_dir, prefix=_TEMP)
        # Held until the file is closed: the cleaner skips locked temp files.
        fcntl.flock(fd, fcntl.LOCK_EX)
        self.upload_id = upload_id
        self.size = 0
        self._owner = owner
        self._key = key
        self._path = Path(name)
        self._out = os.fdopen(fd, "wb")
        owner.track(self, True)

    def write(self, data: bytes) -> None:
        self._out.write(data)
        self.size += len(data)

    def commit(self) -> None:
        try:
            self._out.close()
            with _s3_errors("upload"):
                obstore.put(self._owner.blobs.client, self._key, self._path, chunk_size=CHUNK * 8)
        finally:
            self.abort()

    def abort(self) -> None:
        self._out.close()
        self._path.unlink(missing_ok=True)
        self._owner.track(self, False)


class S3UploadStore:
    """Uploads under `uploads/` in the bucket and prefix of `blobs`, through its client."""

    def __init__(self, blobs: S3BlobStore, clock: Callable[[], float] = time.time) -> None:
        self.blobs = blobs
        self._clock = clock  # epoch seconds, comparable with S3's Last-Modified
        self._receiving: set[S3IncomingFile] = set()
        self._tokens: dict[str, int | None] = {}  # metadata is written once
        self._lock = threading.Lock()

    def track(self, incoming: S3IncomingFile, receiving: bool) -> None:
        with self._lock:
            if receiving:
                self._receiving.add(incoming)
            else:
                self._receiving.discard(incoming)

    def _incoming(self) -> list[S3IncomingFile]:
        with self._lock:
            return list(self._receiving)

    def _objects(self, prefix: str) -> list[ObjectMeta]:
        with _s3_errors("list"):
            return [meta for batch in obstore.list(self.blobs.client, prefix) for meta in batch]

    def create(self, meta: dict[str, object]) -> str:
        upload_id = new_upload_id()
        with _s3_errors("upload"):
            obstore.put(self.blobs.client, f"{_KEYS}/{upload_id}/{META}", json.dumps(meta).encode())
        return upload_id

    def meta(self, upload_id: str) -> dict[str, object] | None:
        if not UPLOAD_ID.match(upload_id):
            return None
        with _s3_errors("read"):
            try:
                body = obstore.get(self.blobs.client, f"{_KEYS}/{upload_id}/{META}").bytes()
            except FileNotFoundError:
                return None
        try:
            meta = json.loads(bytes(body))
        except ValueError:
            return None
        return meta if isinstance(meta, dict) else None

    def entries(self, upload_id: str) -> int:
        if not UPLOAD_ID.match(upload_id):
            return 0
        receiving = sum(1 for f in self._incoming() if f.upload_id == upload_id)
        return len(self._objects(f"{_KEYS}/{upload_id}/")) + receiving

    def uploads(self) -> list[StagedUpload]:
        sizes: dict[str, int] = {}
        latest: dict[str, float] = {}
        for meta in self._objects(f"{_KEYS}/"):
            parts = meta["path"].split("/")
            if len(parts) != 3 or not UPLOAD_ID.match(parts[1]):
                continue
            upload_id = parts[1]
            sizes[upload_id] = sizes.get(upload_id, 0) + int(meta["size"])
            written = meta["last_modified"].timestamp()
            latest[upload_id] = max(latest.get(upload_id, 0.0), written)
        now = self._clock()
        for incoming in self._incoming():  # live: its bytes are arriving now
            sizes[incoming.upload_id] = sizes.get(incoming.upload_id, 0) + incoming.size
            latest[incoming.upload_id] = now
        with self._lock:  # forget uploads other replicas published or removed
            self._tokens = {u: t for u, t in self._tokens.items() if u in latest}
        return [StagedUpload(u, self._token(u), sizes[u], latest[u]) for u in latest]

    def _token(self, upload_id: str) -> int | None:
        if upload_id not in self._tokens:
            meta = self.meta(upload_id)
            if meta is None:
                return None  # removed meanwhile, or its metadata is not written yet
            self._tokens[upload_id] = token_of(meta)
        return self._tokens[upload_id]

    def receive(self, upload_id: str, filename: str) -> IncomingFile:
        if not UPLOAD_ID.match(upload_id):
            raise NotFound("no such upload")
        check_filename(filename)
        return S3IncomingFile(self, upload_id, f"{_KEYS}/{upload_id}/{filename}")

    @contextlib.contextmanager
    def local_files(self, upload_id: str) -> Iterator[list[Path]]:
        with self.blobs.scratch_dir("publish-") as scratch:
            paths = []
            for meta in self._objects(f"{_KEYS}/{upload_id}/"):
                name = meta["path"].rsplit("/", 1)[-1]
                if not name.startswith("."):
                    paths.append(self._download(meta, scratch / name))
            yield paths

    def _download(self, meta: ObjectMeta, target: Path) -> Path:
        with _s3_errors("read"), target.open("wb") as out:
            got = obstore.get(self.blobs.client, meta["path"])
            for chunk in got.stream(min_chunk_size=CHUNK):
                out.write(chunk)
            size = out.tell()
        if size != int(meta["size"]):
            raise StorageUnavailable(f"blob store sent {size} of {meta['size']} bytes")
        return target

    def remove(self, upload_id: str) -> None:
        if not UPLOAD_ID.match(upload_id):
            return
        paths = [meta["path"] for meta in self._objects(f"{_KEYS}/{upload_id}/")]
        if paths:
            with _s3_errors("delete"):
                obstore.delete(self.blobs.client, paths)
        self._tokens.pop(upload_id, None)

    def remove_stale(self, ttl: float) -> int:
        cutoff = self._clock() - ttl
        stale = [u.upload_id for u in self.uploads() if u.last_write < cutoff]
        for upload_id in stale:
            self.remove(upload_id)
        # A replica that crashed while receiving leaves its temp file behind.
        for leftover in self.blobs.temp_dir.glob(_TEMP + "*"):
            with contextlib.suppress(OSError):
                if leftover.stat().st_mtime < cutoff:
                    remove_if_unlocked(leftover)
        return len(stale)

"""Staged CI uploads: one upload per provider version, one PUT per file.

`POST .../uploads` creates an upload bound to one provider version; each
`PUT .../uploads/<id>/<filename>` streams one goreleaser file into it (kept
aside until complete, so a cut connection leaves no half file under the real
name); `POST .../uploads/<id>/publish` hands its files to
`ProviderPublisher.publish` and removes it.

Where uploads live is the `UploadStore`'s business (gitreg/storage/staging.py):
`DATA_DIR/uploads` on a single machine, the blob store's S3 bucket when there
are replicas, so the create, the PUTs and the publish may reach different ones.
This module decides which files an upload may hold and how many bytes.

Staged bytes are limited per token and in total (`max_staged_bytes_per_token`,
`max_staged_bytes`): one publish token once staged 2.4 GB in 27 s (issue 10).
They are checked before a PUT reads a byte, while its bytes arrive, and again
right before the file is stored, when bytes other replicas committed
meanwhile count too. Uploads idle for `staging_ttl` are removed by the
server's cleaner.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

from gitreg.addresses import ProviderAddress
from gitreg.errors import BadRequest, NotFound, PayloadTooLarge
from gitreg.providers.checksums import MAX_SHASUMS_BYTES
from gitreg.providers.names import FileKind, classify
from gitreg.providers.signing import MAX_SIGNATURE_BYTES
from gitreg.settings import Settings
from gitreg.storage.staging import IncomingFile, UploadStore, token_of

MAX_FILES = 200


@dataclass(frozen=True)
class Room:
    """How many more bytes an upload may stage, and the limit that says so."""

    left: int
    limit: str

    def check(self, size: int) -> None:
        if size > self.left:
            raise PayloadTooLarge(f"staged uploads are over {self.limit}; publish or wait")


@dataclass(frozen=True)
class Upload:
    """An upload found for the provider version a request names."""

    upload_id: str
    token: int | None


class UploadStaging:
    def __init__(self, store: UploadStore, per_token: int, total: int, ttl: float = 3600.0) -> None:
        self.store = store
        self.per_token = per_token
        self.total = total
        self.ttl = ttl

    @classmethod
    def for_settings(cls, store: UploadStore, settings: Settings) -> UploadStaging:
        return cls(
            store,
            settings.max_staged_bytes_per_token,
            settings.max_staged_bytes,
            settings.staging_ttl,
        )

    def create(self, address: ProviderAddress, version: str, token_id: int) -> str:
        self.remove_expired()
        meta: dict[str, object] = {
            "provider": address.key,
            "version": version,
            "created": time.time(),
            "token": token_id,
        }
        return self.store.create(meta)

    def open(self, upload_id: str, address: ProviderAddress, version: str) -> Upload:
        """The upload, only for the provider version it was created for."""
        meta = self.store.meta(upload_id)
        if meta is None:
            raise NotFound("no such upload (expired or already published)")
        if meta.get("provider") != address.key or meta.get("version") != version:
            raise NotFound("no such upload for this provider version")
        return Upload(upload_id, token_of(meta))

    def check_file(
        self, upload: Upload, filename: str, type_: str, version: str, max_package: int
    ) -> int:
        """The size cap of a file the upload may receive; refuses unknown names."""
        kind, _ = classify(filename, type_, version)
        if kind is FileKind.OTHER:
            raise BadRequest(
                f"{filename[:120]!r} is not a file of terraform-provider-{type_} {version}"
            )
        if self.store.entries(upload.upload_id) > MAX_FILES:
            raise BadRequest(f"an upload holds at most {MAX_FILES} files")
        caps = {
            FileKind.SHASUMS: MAX_SHASUMS_BYTES,
            FileKind.SIGNATURE: MAX_SIGNATURE_BYTES,
            FileKind.MANIFEST: 64 * 1024,
        }
        return caps.get(kind, max_package)

    def room(self, upload: Upload) -> Room:
        """Bytes `upload` may still stage under both quotas. Files being received
        count, so parallel PUTs cannot each use the whole quota."""
        mine = everyone = 0
        for staged in self.store.uploads():
            everyone += staged.size
            if upload.token is not None and staged.token == upload.token:
                mine += staged.size
        per_token = Room(self.per_token - mine, f"max_staged_bytes_per_token ({self.per_token})")
        total = Room(self.total - everyone, f"max_staged_bytes ({self.total})")
        return min(per_token, total, key=lambda room: room.left)

    def receive(self, upload: Upload, filename: str) -> IncomingFile:
        return self.store.receive(upload.upload_id, filename)

    def commit(self, upload: Upload, incoming: IncomingFile) -> None:
        """Store a received file unless the quotas are exceeded now: with its own
        bytes counted, the room must not be below zero."""
        try:
            self.room(upload).check(0)
        except BaseException:
            incoming.abort()
            raise
        incoming.commit()

    def local_files(self, upload: Upload) -> contextlib.AbstractContextManager[list[Path]]:
        return self.store.local_files(upload.upload_id)

    def remove(self, upload: Upload) -> None:
        self.store.remove(upload.upload_id)

    def remove_expired(self) -> int:
        """Remove uploads nothing was written to for `ttl` seconds; returns how many."""
        return self.store.remove_stale(self.ttl)

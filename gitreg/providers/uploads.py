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
`max_staged_bytes`), so uploads never published cannot fill the disk
(docs/providers.md).
Each file's bytes are reserved in the shared index before they are received
(gitreg/storage/staged_bytes.py): all of a declared Content-Length at once,
else in growing steps as they arrive. The check and the reservation are one
step for every replica, so concurrent PUTs to several replicas cannot each
use the same room. A failed PUT releases its reservation; a stored file
counts until its upload is published, removed, or idle for `staging_ttl`
and removed by the server's cleaner.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gitreg.addresses import ProviderAddress
from gitreg.errors import BadRequest, NotFound, PayloadTooLarge
from gitreg.providers.checksums import MAX_SHASUMS_BYTES
from gitreg.providers.names import FileKind, classify
from gitreg.providers.signing import MAX_SIGNATURE_BYTES
from gitreg.settings import Settings
from gitreg.storage.staged_bytes import Over, StagedBytesIndex, StagedFile, StagingQuota
from gitreg.storage.staging import IncomingFile, UploadStore, token_of

MAX_FILES = 200
STEP = 1024 * 1024  # the smallest reservation made ahead for a body of unknown size


@dataclass
class Reservation:
    """The bytes reserved for one file being received."""

    id: int
    file: StagedFile
    cap: int  # the most bytes the file may have
    bytes: int
    touched: float  # when its row was last written


@dataclass(frozen=True)
class Upload:
    """An upload found for the provider version a request names."""

    upload_id: str
    token: int | None


class UploadStaging:
    def __init__(
        self,
        store: UploadStore,
        ledger: StagedBytesIndex,
        per_token: int,
        total: int,
        ttl: float = 3600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.ledger = ledger
        self.quota = StagingQuota(per_token, total)
        self.ttl = ttl
        self._clock = clock

    @classmethod
    def for_settings(
        cls, store: UploadStore, ledger: StagedBytesIndex, settings: Settings
    ) -> UploadStaging:
        return cls(
            store,
            ledger,
            settings.max_staged_bytes_per_token,
            settings.max_staged_bytes,
            settings.staging_ttl,
        )

    def create(self, address: ProviderAddress, version: str, token_id: int) -> str:
        self.remove_expired()
        meta: dict[str, object] = {
            "provider": address.key,
            "version": version,
            "created": self._clock(),
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

    def reserve(self, upload: Upload, filename: str, size: int, cap: int) -> Reservation:
        """Reserve `size` bytes (a declared Content-Length, else 0) for a file of
        at most `cap` bytes about to be received; PayloadTooLarge, naming the
        quota, if they do not fit."""
        file = StagedFile(upload.upload_id, filename, upload.token)
        now = self._clock()
        got = self.ledger.reserve(file, size, self.quota, now)
        if isinstance(got, str):
            raise self._too_large(got)
        return Reservation(got, file, cap, size, now)

    def write(
        self, incoming: IncomingFile, reservation: Reservation, chunk: bytes, size: int
    ) -> None:
        """Write the next `chunk`, which brings the file to `size` bytes, once
        they are reserved."""
        self.grow(reservation, size)
        incoming.write(chunk)

    def grow(self, reservation: Reservation, size: int) -> None:
        """`size` bytes of the file have arrived: reserve ahead when they are over
        the reservation (doubling, up to the file's cap), falling back to just
        `size` when that does not fit; PayloadTooLarge when `size` does not. A
        reservation still in use is written again every quarter `staging_ttl`,
        so the cleaner never takes it for a dead process's."""
        now = self._clock()
        if size <= reservation.bytes and now - reservation.touched < self.ttl / 4:
            return
        needed = max(size, reservation.bytes)
        ahead = max(size, min(max(2 * needed, STEP), reservation.cap))
        wanted = needed if size <= reservation.bytes else ahead
        over = self.ledger.resize(reservation.id, reservation.file, wanted, self.quota, now)
        if over is not None and wanted > needed:
            wanted = needed
            over = self.ledger.resize(reservation.id, reservation.file, wanted, self.quota, now)
        if over is not None:
            raise self._too_large(over)
        reservation.bytes, reservation.touched = wanted, now

    def _too_large(self, over: Over) -> PayloadTooLarge:
        limit = (
            f"max_staged_bytes_per_token ({self.quota.per_token})"
            if over == "per_token"
            else f"max_staged_bytes ({self.quota.total})"
        )
        return PayloadTooLarge(f"staged uploads are over {limit}; publish or wait")

    def receive(self, upload: Upload, filename: str) -> IncomingFile:
        return self.store.receive(upload.upload_id, filename)

    def commit(self, incoming: IncomingFile, reservation: Reservation, size: int) -> None:
        """Store a received file; from now on it counts with its real size."""
        try:
            incoming.commit()
        except BaseException:
            self.ledger.release(reservation.id)
            raise
        self.ledger.settle(reservation.id, reservation.file, size, self._clock())

    def abort(self, incoming: IncomingFile | None, reservation: Reservation) -> None:
        """The file was not received whole: nothing is stored, nothing reserved."""
        try:
            if incoming is not None:
                incoming.abort()
        finally:
            self.ledger.release(reservation.id)

    def local_files(self, upload: Upload) -> contextlib.AbstractContextManager[list[Path]]:
        return self.store.local_files(upload.upload_id)

    def remove(self, upload: Upload) -> None:
        self.store.remove(upload.upload_id)
        self.ledger.forget_upload(upload.upload_id)

    def remove_stale(self, ttl: float) -> int:
        """Remove uploads nothing was written to for `ttl` seconds, and the bytes
        counted for uploads that are gone; returns how many uploads went."""
        started = self._clock()
        removed = self.store.remove_stale(ttl)
        live = [staged.upload_id for staged in self.store.uploads()]
        # Rows written in the last minute stay: their upload may have been
        # created after the listing, or by a replica whose clock is behind.
        self.ledger.forget(live, started - 60.0, started - ttl)
        return removed

    def remove_expired(self) -> int:
        """Remove uploads nothing was written to for `staging_ttl`; returns how many."""
        return self.remove_stale(self.ttl)

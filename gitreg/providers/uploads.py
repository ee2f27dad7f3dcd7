"""Staging for CI uploads: one directory per upload, one PUT per file.

`POST .../uploads` creates `<data-dir>/uploads/<id>/` bound to one provider
version; each `PUT .../uploads/<id>/<filename>` streams one goreleaser file
into it (written to a temp name, renamed when complete, so a cut connection
leaves no half file under the real name); `POST .../uploads/<id>/publish`
hands the directory to `ProviderPublisher.publish` and removes it. Uploads
left unpublished are removed after `MAX_AGE`.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import shutil
import time
from pathlib import Path

from gitreg.addresses import ProviderAddress
from gitreg.errors import BadRequest, NotFound
from gitreg.providers.checksums import MAX_SHASUMS_BYTES
from gitreg.providers.names import FileKind, classify
from gitreg.providers.signing import MAX_SIGNATURE_BYTES

MAX_AGE = 6 * 3600.0
MAX_FILES = 200
_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")
_META = ".upload.json"


class UploadStaging:
    def __init__(self, root: Path) -> None:
        self.root = root

    def create(self, address: ProviderAddress, version: str) -> str:
        self.remove_stale()
        upload_id = secrets.token_urlsafe(16)
        directory = self.root / upload_id
        directory.mkdir(parents=True, mode=0o700)
        meta = {"provider": address.key, "version": version, "created": time.time()}
        (directory / _META).write_text(json.dumps(meta))
        return upload_id

    def directory(self, upload_id: str, address: ProviderAddress, version: str) -> Path:
        """The upload's directory, only for the provider version it was created for."""
        if not _ID.match(upload_id):
            raise NotFound("no such upload")
        directory = self.root / upload_id
        try:
            meta = json.loads((directory / _META).read_text())
        except (OSError, ValueError) as exc:
            raise NotFound("no such upload (expired or already published)") from exc
        if meta.get("provider") != address.key or meta.get("version") != version:
            raise NotFound("no such upload for this provider version")
        return directory

    def target(
        self, directory: Path, filename: str, type_: str, version: str, max_package: int
    ) -> tuple[Path, int]:
        """Where an uploaded file goes and its size cap; refuses unknown names."""
        kind, _ = classify(filename, type_, version)
        if kind is FileKind.OTHER:
            raise BadRequest(
                f"{filename[:120]!r} is not a file of terraform-provider-{type_} {version}"
            )
        if sum(1 for _ in directory.iterdir()) > MAX_FILES:
            raise BadRequest(f"an upload holds at most {MAX_FILES} files")
        caps = {
            FileKind.SHASUMS: MAX_SHASUMS_BYTES,
            FileKind.SIGNATURE: MAX_SIGNATURE_BYTES,
            FileKind.MANIFEST: 64 * 1024,
        }
        return directory / filename, caps.get(kind, max_package)

    def files(self, directory: Path) -> list[Path]:
        return [p for p in directory.iterdir() if not p.name.startswith(".")]

    def remove(self, directory: Path) -> None:
        shutil.rmtree(directory, ignore_errors=True)

    def remove_stale(self) -> None:
        if not self.root.is_dir():
            return
        cutoff = time.time() - MAX_AGE
        for directory in self.root.iterdir():
            with contextlib.suppress(OSError):
                if directory.stat().st_mtime < cutoff:
                    shutil.rmtree(directory, ignore_errors=True)

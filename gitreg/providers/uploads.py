"""Staging for CI uploads: one directory per upload, one PUT per file.

`POST .../uploads` creates `<data-dir>/uploads/<id>/` bound to one provider
version; each `PUT .../uploads/<id>/<filename>` streams one goreleaser file
into it (written to a temp name, renamed when complete, so a cut connection
leaves no half file under the real name); `POST .../uploads/<id>/publish`
hands the directory to `ProviderPublisher.publish` and removes it.

Staged bytes are limited per token and in total (`max_staged_bytes_per_token`,
`max_staged_bytes`): one publish token once staged 2.4 GB in 27 s (issue 10).
Uploads idle for `staging_ttl` are removed by the server's cleaner.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from gitreg.addresses import ProviderAddress
from gitreg.errors import BadRequest, NotFound, PayloadTooLarge
from gitreg.providers.checksums import MAX_SHASUMS_BYTES
from gitreg.providers.names import FileKind, classify
from gitreg.providers.signing import MAX_SIGNATURE_BYTES
from gitreg.settings import Settings

MAX_FILES = 200
_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")
_META = ".upload.json"


@dataclass(frozen=True)
class Room:
    """How many more bytes an upload may stage, and the limit that says so."""

    left: int
    limit: str

    def check(self, size: int) -> None:
        if size > self.left:
            raise PayloadTooLarge(f"staged uploads are over {self.limit}; publish or wait")


class UploadStaging:
    def __init__(self, root: Path, per_token: int, total: int, ttl: float = 3600.0) -> None:
        self.root = root
        self.per_token = per_token
        self.total = total
        self.ttl = ttl

    @classmethod
    def for_settings(cls, settings: Settings) -> UploadStaging:
        return cls(
            settings.data_dir / "uploads",
            settings.max_staged_bytes_per_token,
            settings.max_staged_bytes,
            settings.staging_ttl,
        )

    def create(self, address: ProviderAddress, version: str, token_id: int) -> str:
        self.remove_stale(self.ttl)
        upload_id = secrets.token_urlsafe(16)
        directory = self.root / upload_id
        directory.mkdir(parents=True, mode=0o700)
        meta = {
            "provider": address.key,
            "version": version,
            "created": time.time(),
            "token": token_id,
        }
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

    def room(self, directory: Path) -> Room:
        """Bytes the upload in `directory` may still stage under both quotas.
        Partial files count, so parallel PUTs cannot each use the whole quota."""
        token = _token_of(directory)
        mine = everyone = 0
        for upload in self._uploads():
            used = _size_of(upload)
            everyone += used
            if token is not None and _token_of(upload) == token:
                mine += used
        per_token = Room(self.per_token - mine, f"max_staged_bytes_per_token ({self.per_token})")
        total = Room(self.total - everyone, f"max_staged_bytes ({self.total})")
        return min(per_token, total, key=lambda room: room.left)

    def remove_stale(self, ttl: float) -> int:
        """Remove uploads nothing was written to for `ttl` seconds; returns how many."""
        cutoff = time.time() - ttl
        count = 0
        for directory in self._uploads():
            with contextlib.suppress(OSError):
                if _last_write(directory) < cutoff:
                    shutil.rmtree(directory, ignore_errors=True)
                    count += 1
        return count

    def _uploads(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return [p for p in self.root.iterdir() if _ID.match(p.name) and p.is_dir()]


def _token_of(directory: Path) -> int | None:
    try:
        token = json.loads((directory / _META).read_text()).get("token")
    except (OSError, ValueError, AttributeError):
        return None
    return token if isinstance(token, int) else None


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

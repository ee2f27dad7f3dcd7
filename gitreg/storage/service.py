"""The registry's storage as a whole: a consistent backup of a live data dir
(`gitreg backup`), a move to PostgreSQL and S3 (`gitreg migrate-storage`),
and the sweep of blob temp files left by crashed writers.

A backup copies the index with the engine's online backup, which yields a
consistent snapshot while the server keeps reading and writing. Blobs are
immutable and content-addressed, so copying those the destination lacks is
enough, and any blob the copied index refers to was durable before its row
was committed (docs/security.md). Git mirrors are not copied: they are re-fetched on the
next sync, and every published version's archive is already in the blobs.

A move may run while the registry serves; running it again after the old
server stopped copies what was published meanwhile (gitreg/storage/copy.py),
and then the replicas can start on the new backends (docs/scale-out.md,
"Moving an existing registry").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from gitreg.errors import BadRequest
from gitreg.settings import Settings
from gitreg.storage.blobs import BlobStore, copy_missing_files
from gitreg.storage.copy import CopyReport, Progress, copy_blobs, copy_index
from gitreg.storage.index import open_index
from gitreg.storage.protocols import ModuleIndex
from gitreg.storage.secrets import open_secret_store
from gitreg.storage.select import open_blob_store

# Directories copied as-is besides blobs: the local CA and signing material.
_EXTRA_DIRS = ("tls", "keys", "secrets")


@dataclass(frozen=True)
class MoveTargets:
    """Where `Storage.move` copies to; built by `move_targets`, which checks them."""

    database_url: str  # "" to keep the index where it is
    blob_store: str  # "" to keep the blobs where they are
    secret_key_file: Path | None  # seals the secrets in the target database


def move_targets(settings: Settings, database_url: str, blob_store: str) -> MoveTargets:
    """The targets of a move of the registry `settings` describe; BadRequest
    for no target, for the database it already uses, or for a database target
    without `secret_key_file` (its secrets are sealed with it there)."""
    if not database_url and not blob_store:
        raise BadRequest("name a target: --to-database-url and/or --to-blob-store")
    if database_url and database_url == settings.database_url:
        raise BadRequest("--to-database-url is the database this registry already uses")
    if database_url and settings.secret_key_file is None:
        raise BadRequest(
            "moving to PostgreSQL needs secret_key_file (GITREG_SECRET_KEY_FILE): the"
            " registry's secrets are sealed with it in the shared database"
        )
    return MoveTargets(database_url, blob_store, settings.secret_key_file)


@dataclass(frozen=True)
class Backup:
    dest: Path
    new_blobs: int  # copied now; the others were there from an earlier backup


class Storage:
    def __init__(self, settings: Settings, index: ModuleIndex, blobs: BlobStore) -> None:
        self._settings = settings
        self._index = index
        self._blobs = blobs

    def backup(self, dest: Path) -> Backup:
        """Copy the index, the blobs `dest` lacks and the local CA and key
        material into the directory `dest` (made 0700). BadRequest when `dest`
        is the data dir; ConfigError when the copied index fails its integrity
        check (then it is not kept)."""
        dest = dest.absolute()
        if dest == self._settings.data_dir:
            raise BadRequest("the backup destination must differ from the data dir")
        dest.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._index.backup(dest / "index.sqlite3")
        blobs = self._blobs.backup(dest / "blobs")
        for name in _EXTRA_DIRS:
            source = self._settings.data_dir / name
            if source.is_dir():
                copy_missing_files(source, dest / name)
                (dest / name).chmod(0o700)
        return Backup(dest, blobs)

    def move(self, targets: MoveTargets, progress: Progress) -> CopyReport:
        """Copy the blobs, then the index, into `targets`, each only what the
        target lacks, each blob verified by its sha256 as stored there; file
        secrets (URL-signing keys, provider key secrets) are imported into the
        target database sealed with `targets.secret_key_file`, and copied
        webhook secrets are sealed. ConfigError for a blob whose bytes no
        longer match their name."""
        report = CopyReport()
        if targets.blob_store:
            moved = dataclasses.replace(self._settings, blob_store=targets.blob_store)
            copy_blobs(self._blobs, open_blob_store(moved), report, progress)
        if targets.database_url:
            assert targets.secret_key_file is not None  # move_targets checked it
            target = open_index(targets.database_url, self._settings.db_path, pool_size=2)
            try:
                copy_index(self._index, target, report, progress)
                open_secret_store(self._settings.data_dir, targets.secret_key_file, target)
            finally:
                target.close()
        return report

    def remove_stale_temp_files(self, older_than: float) -> int:
        """Remove the blob store's temp files older than `older_than` seconds
        that no live writer holds: leftovers of crashed writers. How many went."""
        return self._blobs.remove_stale_temp_files(older_than=older_than)

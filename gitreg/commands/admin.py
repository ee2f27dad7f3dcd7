"""`gitreg backup DEST`: a consistent copy of a live data dir (checklist S4).

The index is copied with SQLite's online backup API, which yields a
consistent snapshot while the server keeps reading and writing. Blobs are
immutable and content-addressed, so copying those the destination lacks is
enough, and any blob the copied index refers to was durable before its row
was committed (S2). Git mirrors are not copied: they are re-fetched on the
next sync, and every published version's archive is already in the blobs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from gitreg.errors import BadRequest
from gitreg.services import Services

# Directories copied as-is besides blobs: the local CA and signing material.
_EXTRA_DIRS = ("tls", "keys", "secrets")


def _copy_tree(source: Path, dest: Path) -> int:
    """Copy files missing from `dest` (blobs never change under one name)."""
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


def backup(svc: Services, dest: Path) -> int:
    dest = dest.absolute()
    if dest == svc.settings.data_dir:
        raise BadRequest("the backup destination must differ from the data dir")
    dest.mkdir(parents=True, exist_ok=True, mode=0o700)
    svc.index.backup(dest / "index.sqlite3")
    blobs = _copy_tree(svc.settings.blob_dir, dest / "blobs")
    for name in _EXTRA_DIRS:
        source = svc.settings.data_dir / name
        if source.is_dir():
            _copy_tree(source, dest / name)
            (dest / name).chmod(0o700)
    print(f"backed up the index and {blobs} new blob(s) to {dest} (integrity_check: ok)")
    return 0

"""`gitreg backup DEST`: a consistent copy of a live data dir (checklist S4).

The index is copied with SQLite's online backup API, which yields a
consistent snapshot while the server keeps reading and writing. Blobs are
immutable and content-addressed, so copying those the destination lacks is
enough, and any blob the copied index refers to was durable before its row
was committed (S2). Git mirrors are not copied: they are re-fetched on the
next sync, and every published version's archive is already in the blobs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gitreg.cli_handlers import ReadOnly
from gitreg.errors import BadRequest
from gitreg.services import Services
from gitreg.storage.blobs import copy_missing_files

# Directories copied as-is besides blobs: the local CA and signing material.
_EXTRA_DIRS = ("tls", "keys", "secrets")


def backup(svc: Services, dest: Path) -> int:
    dest = dest.absolute()
    if dest == svc.settings.data_dir:
        raise BadRequest("the backup destination must differ from the data dir")
    dest.mkdir(parents=True, exist_ok=True, mode=0o700)
    svc.index.backup(dest / "index.sqlite3")
    blobs = svc.blobs.backup(dest / "blobs")
    for name in _EXTRA_DIRS:
        source = svc.settings.data_dir / name
        if source.is_dir():
            copy_missing_files(source, dest / name)
            (dest / name).chmod(0o700)
    print(f"backed up the index and {blobs} new blob(s) to {dest} (integrity_check: ok)")
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `backup`; it sets `handler(svc, args)`."""
    parser = sub.add_parser("backup", parents=[common], help="copy a live data dir consistently")
    parser.add_argument("dest", type=Path, help="directory to write the backup to")
    parser.set_defaults(handler=ReadOnly(lambda svc, a: backup(svc, a.dest)))

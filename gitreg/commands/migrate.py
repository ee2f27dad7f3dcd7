"""`gitreg migrate-storage`: move a single-machine registry to PostgreSQL + S3.

Run it with the registry's own settings (its data dir, or its config file)
and name the targets. It may run while the registry serves; running it again
after the old server stopped copies what was published meanwhile, and then
the replicas can start on the new backends (docs/scale-out.md, "Moving an
existing registry").
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from gitreg.errors import BadRequest
from gitreg.services import Services
from gitreg.storage.blobs import BlobStore
from gitreg.storage.copy import CopyReport, copy_blobs, copy_index
from gitreg.storage.index import open_index

_BAR = 30


class ProgressBar:
    """One line per stage on the terminal, redrawn in place; whole lines at the
    end of each stage when the output is a file or a pipe."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._live = out.isatty()

    def __call__(self, what: str, done: int, total: int) -> None:
        filled = _BAR * done // total if total else _BAR
        line = f"{what:>6} [{'#' * filled}{'.' * (_BAR - filled)}] {done}/{total}"
        if self._live:
            self._out.write("\r" + line + ("\n" if done == total else ""))
        elif done == total:
            self._out.write(line + "\n")
        self._out.flush()


def migrate_storage(svc: Services, args: argparse.Namespace) -> int:
    to_database, to_blobs = args.to_database_url or "", args.to_blob_store or ""
    if not to_database and not to_blobs:
        raise BadRequest("name a target: --to-database-url and/or --to-blob-store")
    if to_database and to_database == svc.settings.database_url:
        raise BadRequest("--to-database-url is the database this registry already uses")
    report = CopyReport()
    progress = ProgressBar(sys.stderr)
    if to_blobs:
        target_blobs = open_target_blobs(svc, to_blobs)
        copy_blobs(svc.blobs, target_blobs, report, progress)
    if to_database:
        target = open_index(to_database, svc.settings.db_path, pool_size=2)
        try:
            copy_index(svc.index, target, report, progress)
        finally:
            target.close()
    rows = sum(report.rows.values())
    print(
        f"copied {report.blobs_copied} blob(s) ({report.blobs_present} already there, each"
        f" verified by sha256) and {rows} row(s) in {len(report.rows)} table(s)"
    )
    return 0


def open_target_blobs(svc: Services, url: str) -> BlobStore:
    raise BadRequest(f"unsupported blob store {url}")


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `migrate-storage`; it sets `handler(svc, args)`."""
    parser = sub.add_parser(
        "migrate-storage",
        parents=[common],
        help="copy this registry's index and blobs into PostgreSQL and S3",
    )
    parser.add_argument("--to-database-url", help="postgresql://USER:PASS@HOST:PORT/DB")
    parser.add_argument("--to-blob-store", help="s3://BUCKET/PREFIX")
    parser.set_defaults(handler=migrate_storage)

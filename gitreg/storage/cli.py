"""`gitreg backup DEST` and `gitreg migrate-storage` (gitreg/storage/service.py)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TextIO

from gitreg.cli_handlers import ReadOnly
from gitreg.errors import ConfigError
from gitreg.services import Services, build_services
from gitreg.settings import Settings
from gitreg.storage.service import move_targets

_BAR = 30


def backup(svc: Services, dest: Path) -> int:
    done = svc.storage.backup(dest)
    print(
        f"backed up the index and {done.new_blobs} new blob(s) to {done.dest} (integrity_check: ok)"
    )
    return 0


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


def migrate_storage(args: argparse.Namespace, settings: Settings) -> int:
    """Standalone: it opens the registry being moved itself (`_open_source`)."""
    targets = move_targets(settings, args.to_database_url or "", args.to_blob_store or "")
    svc = _open_source(settings)
    try:
        report = svc.storage.move(targets, ProgressBar(sys.stderr))
    finally:
        svc.close()
    rows = sum(report.rows.values())
    print(
        f"copied {report.blobs_copied} blob(s) ({report.blobs_present} already there, each"
        f" verified by sha256) and {rows} row(s) in {len(report.rows)} table(s)"
    )
    return 0


def _open_source(settings: Settings) -> Services:
    """The registry being moved, opened as it runs today. A single machine that
    never used a secret key keeps its secrets in files: opening it with the
    key would seal them into its own index and lock its running server out,
    so the key is used for the source only when the source already needs it."""
    try:
        return build_services(dataclasses.replace(settings, secret_key_file=None))
    except ConfigError:
        return build_services(settings)


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `backup` (it sets `handler(svc, args)`) and `migrate-storage` (`standalone`)."""
    parser = sub.add_parser("backup", parents=[common], help="copy a live data dir consistently")
    parser.add_argument("dest", type=Path, help="directory to write the backup to")
    parser.set_defaults(handler=ReadOnly(lambda svc, a: backup(svc, a.dest)))
    parser = sub.add_parser(
        "migrate-storage",
        parents=[common],
        help="copy this registry's index and blobs into PostgreSQL and S3",
    )
    parser.add_argument("--to-database-url", help="postgresql://USER:PASS@HOST:PORT/DB")
    parser.add_argument("--to-blob-store", help="s3://BUCKET/PREFIX")
    parser.set_defaults(standalone=migrate_storage)

"""`gitreg migrate-storage`: move a single-machine registry to PostgreSQL + S3.

Run it with the registry's own settings (its data dir, or its config file)
and name the targets. It may run while the registry serves; running it again
after the old server stopped copies what was published meanwhile, and then
the replicas can start on the new backends (docs/scale-out.md, "Moving an
existing registry").
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TextIO

from gitreg.errors import BadRequest, ConfigError
from gitreg.services import Services, build_services
from gitreg.settings import Settings
from gitreg.storage.copy import CopyReport, copy_blobs, copy_index
from gitreg.storage.index import open_index
from gitreg.storage.secrets import open_secret_store
from gitreg.storage.select import open_blob_store

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


def migrate_storage(args: argparse.Namespace, settings: Settings) -> int:
    to_database, to_blobs = args.to_database_url or "", args.to_blob_store or ""
    if not to_database and not to_blobs:
        raise BadRequest("name a target: --to-database-url and/or --to-blob-store")
    if to_database and to_database == settings.database_url:
        raise BadRequest("--to-database-url is the database this registry already uses")
    if to_database and settings.secret_key_file is None:
        raise BadRequest(
            "moving to PostgreSQL needs secret_key_file (GITREG_SECRET_KEY_FILE): the"
            " registry's secrets are sealed with it in the shared database"
        )
    svc = _open_source(settings)
    try:
        report = CopyReport()
        progress = ProgressBar(sys.stderr)
        if to_blobs:
            target_blobs = open_blob_store(dataclasses.replace(settings, blob_store=to_blobs))
            copy_blobs(svc.blobs, target_blobs, report, progress)
        if to_database:
            _copy_index_and_secrets(svc, settings, to_database, report, progress)
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


def _copy_index_and_secrets(
    svc: Services, settings: Settings, url: str, report: CopyReport, progress: ProgressBar
) -> None:
    target = open_index(url, settings.db_path, pool_size=2)
    try:
        copy_index(svc.index, target, report, progress)
        # File secrets (URL-signing keys, provider key secrets) are imported into
        # the target sealed with the key, and copied webhook secrets are sealed.
        assert settings.secret_key_file is not None
        open_secret_store(settings.data_dir, settings.secret_key_file, target)
    finally:
        target.close()


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
    parser.set_defaults(standalone=migrate_storage)

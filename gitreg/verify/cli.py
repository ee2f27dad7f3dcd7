"""`gitreg verify [DIR] [--readonly]` (docs/verify.md): exit 0 when every
module installed from a registry that serves attestations verifies, 1 with one
line per module that does not, 2 for a usage error (no such directory, not
initialised, an unreadable lock file); 1 too when the lock file cannot be
written."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gitreg.errors import BadRequest
from gitreg.settings import Settings
from gitreg.verify.lockfile import LOCK_NAME, read_lock, write_lock
from gitreg.verify.registry import Registry
from gitreg.verify.service import Verifier

TIMEOUT = 30.0


def verify(args: argparse.Namespace, settings: Settings) -> int:
    import httpx

    workdir: Path = args.dir
    if not workdir.is_dir():
        raise BadRequest(f"{workdir} is not a directory")
    lock_path = workdir / LOCK_NAME
    lock = read_lock(lock_path)
    with httpx.Client(timeout=TIMEOUT, follow_redirects=True) as client:
        verifier = Verifier(lambda host: Registry(client, host))
        report = verifier.verify(workdir, lock, args.readonly)
    for line in report.verified:
        print(f"ok           {line}")
    for line in report.unverifiable:
        print(f"unverifiable {line}")
    for line in report.failed:
        print(f"FAILED       {line}", file=sys.stderr)
    if report.failed:
        return 1
    if not args.readonly:
        write_lock(lock_path, report.lock)
        print(f"wrote {lock_path}")
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    cmd = sub.add_parser(
        "verify",
        parents=[common],
        help="check installed modules against signed statements and the log (after init)",
    )
    cmd.add_argument("dir", nargs="?", type=Path, default=Path("."), metavar="DIR")
    cmd.add_argument(
        "--readonly",
        action="store_true",
        help=f"change nothing; fail on any module, version or hash not in {LOCK_NAME}",
    )
    cmd.set_defaults(standalone=verify)

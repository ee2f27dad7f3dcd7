"""`gitreg reindex`: document versions published before documentation existed
(gitreg/catalog/reindex.py), then check them for breaking changes
(gitreg/semver_guard/service.py). On a terminal a progress bar is redrawn in place,
as `gitreg mirror sync` does; otherwise one line per version.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from gitreg.services import Services


class Bar:
    """The reindex's `Progress`, drawn on `out`."""

    def __init__(self, out: TextIO, quiet: bool) -> None:
        self.out, self.total, self.quiet = out, 0, quiet
        self.tty = out.isatty() and not quiet

    def begin(self, total: int) -> None:
        self.total = total

    def step(self, done: int, label: str, ok: bool) -> None:
        if self.quiet:
            return
        if not self.tty:
            print(f"{done}/{self.total} {label}{'' if ok else ': failed (see log)'}", file=self.out)
            return
        width = 30
        filled = width * done // max(self.total, 1)
        bar = "#" * filled + " " * (width - filled)
        self.out.write(f"\r\x1b[K[{bar}] {done}/{self.total} {label}"[:200])
        if done == self.total:
            self.out.write("\n")
        self.out.flush()


def reindex(svc: Services, out: TextIO | None = None, quiet: bool = False) -> int:
    out = out or sys.stdout  # looked up per call: tests and callers swap sys.stdout
    done = svc.catalog.reindex(Bar(out, quiet))
    failed = done.failed
    signed = svc.attestations.backfill()
    if signed:
        print(f"reindex: signed the statements of {signed} versions", file=out)
    print(
        f"reindex: {done.attempted - failed} documented, {failed} failed"
        + (" (run again to retry them)" if failed else ""),
        file=out,
    )
    # After the documents: the semver guard compares them (docs/semver-guard.md).
    checked, unchecked = svc.semver.reindex(Bar(out, quiet))
    if checked or unchecked:
        print(
            f"reindex: {checked} versions checked for breaking changes, {unchecked} failed",
            file=out,
        )
    return 1 if failed or unchecked else 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    cmd = sub.add_parser(
        "reindex",
        parents=[common],
        help="extract documentation for versions published before it existed (resumable)",
    )
    cmd.add_argument("--quiet", action="store_true", help="print only the summary")
    cmd.set_defaults(handler=lambda svc, a: reindex(svc, quiet=a.quiet))

"""`gitreg mirror sync PATH`, `gitreg mirror export DIR`, `gitreg mirror list`.

`sync` is `terraform providers mirror`, but into the server's cache
(gitreg/mirror/sync.py), showing progress. The running server sees the packages
at once (it shares the data dir). `export` writes what the mirror holds as a
static mirror directory for air-gapped sites.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from gitreg.addresses import check_platform
from gitreg.cli_handlers import ReadOnly
from gitreg.mirror.service import MirrorService
from gitreg.mirror.sync import Selection, megabytes
from gitreg.mirror.upstream import Progress
from gitreg.services import Services

Parser = argparse.ArgumentParser


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: Parser) -> None:
    """Add `mirror sync|export|list` to the CLI; each sets its `handler`."""
    mirror = sub.add_parser("mirror", parents=[common], help="the provider network mirror")
    mirror_sub = mirror.add_subparsers(dest="mirror_command", required=True)
    sync = mirror_sub.add_parser(
        "sync", parents=[common], help="pre-fill the cache for a Terraform configuration"
    )
    sync.add_argument("path", type=Path, help="directory of .tf files (searched recursively)")
    sync.add_argument(
        "--platform",
        action="append",
        default=[],
        metavar="OS_ARCH",
        help="platform to fetch, repeatable (default: mirror_platforms)",
    )
    sync.add_argument(
        "--upstream",
        action="append",
        metavar="HOSTNAME=BASE_URL",
        help="fetch HOSTNAME's providers from BASE_URL (repeatable)",
    )
    sync.add_argument("--json", action="store_true", help="print the result as JSON")
    sync.set_defaults(handler=lambda svc, a: sync_command(svc, a.path, a.platform, a.json))

    export = mirror_sub.add_parser(
        "export", parents=[common], help="write the cache as a static mirror directory"
    )
    export.add_argument("dest", type=Path)
    export.add_argument("--platform", action="append", default=[], metavar="OS_ARCH")
    # Names the hostname gitreg's own providers are exported under, as `serve
    # --public-url` does; cli._settings() reads `public_url` from the namespace.
    export.add_argument("--public-url", help="URL Terraform users reach gitreg at")
    export.set_defaults(handler=ReadOnly(lambda svc, a: export_command(svc, a.dest, a.platform)))

    listing = mirror_sub.add_parser("list", parents=[common], help="list cached packages")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=ReadOnly(lambda svc, a: list_command(svc, a.json)))


# -- progress ---------------------------------------------------------------------------


class Reporter:
    """One permanent line per finished package; on a terminal, also a status line
    with the bytes received so far, redrawn at most five times a second."""

    def __init__(self, out: TextIO, quiet: bool = False) -> None:
        self.out = out
        self.quiet = quiet
        self.tty = out.isatty() and not quiet
        self.active: dict[str, tuple[int, int | None]] = {}
        self._drawn = 0.0

    def line(self, text: str) -> None:
        if self.quiet:
            return
        if self.tty:
            self.out.write("\r\x1b[K")
        print(text, file=self.out, flush=True)
        self._draw(force=True)

    def progress(self, label: str) -> Progress:
        def update(done: int, total: int | None) -> None:
            self.active[label] = (done, total)
            self._draw()

        return update

    def finished(self, label: str) -> None:
        self.active.pop(label, None)

    def _draw(self, force: bool = False) -> None:
        if not self.tty or not self.active:
            return
        now = time.monotonic()
        if not force and now - self._drawn < 0.2:
            return
        self._drawn = now
        parts = [
            f"{label.rsplit(' ', 1)[-1]} {megabytes(done)}/{megabytes(total) if total else '?'}"
            for label, (done, total) in self.active.items()
        ]
        self.out.write(("\r\x1b[Kfetching: " + ", ".join(parts))[:200])
        self.out.flush()


# -- sync -------------------------------------------------------------------------------


def sync_command(svc: Services, path: Path, platforms: list[str], as_json: bool) -> int:
    chosen = tuple(dict.fromkeys(check_platform(p) for p in platforms))
    return asyncio.run(_sync(svc.mirror, path, chosen, as_json))


async def _sync(
    mirror: MirrorService, path: Path, platforms: tuple[str, ...], as_json: bool
) -> int:
    report = Reporter(sys.stdout, quiet=as_json)
    try:
        selections = await mirror.sync(path, platforms, report)
    finally:
        await mirror.aclose()  # its connections belong to this command's event loop
    failed = [s for s in selections if s.error] + [
        s for s in selections for p in s.packages.values() if p["status"] != "ok"
    ]
    if as_json:
        print(json.dumps([_as_json(s) for s in selections], indent=2))
    else:
        packages = sum(1 for s in selections for p in s.packages.values() if p["status"] == "ok")
        report.line(
            f"{len(selections)} provider requirement(s), {packages} package(s) cached,"
            f" {len(failed)} problem(s)"
        )
    return 1 if failed else 0


def _as_json(selection: Selection) -> dict[str, Any]:
    return {
        "root": str(selection.root),
        "provider": str(selection.address),
        "constraints": str(selection.constraints),
        "version": selection.version,
        "locked": selection.locked,
        "error": selection.error,
        "packages": selection.packages,
    }


# -- export and list --------------------------------------------------------------------


def export_command(svc: Services, dest: Path, platforms: list[str]) -> int:
    chosen = tuple(dict.fromkeys(check_platform(p) for p in platforms))
    result = svc.mirror.export(dest, chosen)
    for note in result.notes:
        print(f"note: {note}")
    print(
        f"exported {result.providers} provider(s), {result.versions} version(s),"
        f" {result.packages} package(s) ({megabytes(result.bytes_written)} written) to {dest}"
    )
    print(
        "serve it over https as a network_mirror, or point a filesystem_mirror at it"
        " (its zips are in the packed layout); see docs/mirror.md"
    )
    # Cached public modules go along for another gitreg (docs/module-proxy.md).
    modules = svc.module_proxy.export(dest)
    if modules.versions:
        print(
            f"exported {modules.versions} cached module version(s) to {dest / 'modules'};"
            " load them with `gitreg modules import`"
        )
    return 0


def list_command(svc: Services, as_json: bool) -> int:
    rows: list[dict[str, Any]] = [
        {
            "provider": p.provider_key,
            "version": p.version,
            "platform": p.platform,
            "size": p.size,
            "hashes": [p.h1, p.zh],
            "signed_by": p.key_id,
        }
        for p in svc.mirror.cached_packages()
    ]
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("the mirror cache is empty; fill it with `gitreg mirror sync PATH`")
    for row in rows:
        print(f"{row['provider']} {row['version']} {row['platform']} {megabytes(row['size'])}")
    return 0

"""`gitreg modules prefetch|proxied|import`: the pull-through module cache (docs/module-proxy.md).

These hang under the existing `gitreg modules` listing (gitreg/repositories/cli.py),
which keeps answering when no subcommand is given.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from gitreg.cli_handlers import ReadOnly
from gitreg.mirror.cli import Reporter
from gitreg.services import Services

Parser = argparse.ArgumentParser


def register(sub: argparse._SubParsersAction[Parser], common: Parser) -> None:
    """Add subcommands to the `modules` parser `repos.register_modules` made."""
    modules = sub.choices["modules"]
    modules_sub = modules.add_subparsers(dest="modules_command")
    # `gitreg modules` alone still lists; `modules list` says so explicitly, as `jobs list` does.
    listing = modules_sub.add_parser("list", parents=[common], help="list modules (default)")
    listing.add_argument("--json", action="store_true")
    listing.add_argument("--verbose", "-v", action="store_true")
    listing.set_defaults(handler=modules.get_default("handler"))
    fetch = modules_sub.add_parser(
        "prefetch", parents=[common], help="cache the proxied modules a configuration calls"
    )
    fetch.add_argument("path", type=Path, help="directory of .tf files (searched recursively)")
    fetch.set_defaults(handler=lambda svc, a: prefetch_command(svc, a.path))
    proxied = modules_sub.add_parser(
        "proxied", parents=[common], help="list cached public modules and moved upstream tags"
    )
    proxied.add_argument("--check", action="store_true", help="ask upstream for moved tags")
    proxied.add_argument("--json", action="store_true")
    proxied.set_defaults(handler=ReadOnly(lambda svc, a: proxied_command(svc, a.check, a.json)))
    load = modules_sub.add_parser(
        "import", parents=[common], help="load modules from a `gitreg mirror export` directory"
    )
    load.add_argument("path", type=Path)
    load.set_defaults(handler=lambda svc, a: import_command(svc, a.path))


def prefetch_command(svc: Services, path: Path) -> int:
    reporter = Reporter(sys.stdout)
    result = asyncio.run(svc.module_proxy.prefetch(path, reporter.line))
    for note in result.notes:
        print(f"note: {note}")
    print(f"cached {len(result.cached)} module version(s), {len(result.failed)} failed")
    for failure in result.failed:
        print(f"error: {failure}", file=sys.stderr)
    return 1 if result.failed else 0


def proxied_command(svc: Services, check: bool, as_json: bool) -> int:
    proxy = svc.module_proxy
    if check:
        asyncio.run(proxy.check_moves())
    versions = proxy.cached_versions()
    moves = proxy.moves()
    if as_json:
        answer: dict[str, Any] = {
            "versions": [dataclasses.asdict(v) for v in versions],
            "moved_tags": [dataclasses.asdict(m) for m in moves],
        }
        print(json.dumps(answer, indent=2))
        return 1 if moves else 0
    if not versions:
        print("no public modules cached; `gitreg modules prefetch DIR` fills the cache")
    for v in versions:
        print(f"{v.module_key} {v.version} {v.commit_sha[:12]} {v.archive_size} bytes {v.location}")
    for m in moves:
        print(
            f"moved: {m.module_key} {m.version}: upstream {m.ref} now at {m.upstream_commit[:12]},"
            f" cached {m.cached_commit[:12]} is kept"
        )
    return 1 if moves else 0


def import_command(svc: Services, path: Path) -> int:
    result = svc.module_proxy.import_from(path)
    print(
        f"imported {result.versions} module version(s); {result.kept} already cached here were kept"
    )
    return 0

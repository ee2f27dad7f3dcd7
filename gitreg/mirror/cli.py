"""`gitreg mirror sync PATH`, `gitreg mirror export DIR`, `gitreg mirror list`.

`sync` is `terraform providers mirror`, but into the server's cache: it reads
the configuration (gitreg.mirror.config), picks the versions `terraform init`
would pick (gitreg.versions), and fetches and verifies their
packages for the chosen platforms, showing progress. The running server sees
them at once (it shares the data dir). `export` writes what the mirror holds
as a static mirror directory for air-gapped sites.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from gitreg.addresses import ProviderAddress, check_platform
from gitreg.cli_handlers import ReadOnly
from gitreg.errors import GitregError, NotFound
from gitreg.mirror.config import RootConfiguration, read_configurations
from gitreg.mirror.export import export_static
from gitreg.mirror.service import MirrorService
from gitreg.mirror.store import MirrorPackage
from gitreg.mirror.upstream import Progress
from gitreg.module_proxy.export import export_modules
from gitreg.services import Services
from gitreg.versions import Constraints, Version, parse_version

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
            f"{label.rsplit(' ', 1)[-1]} {_mb(done)}/{_mb(total) if total else '?'}"
            for label, (done, total) in self.active.items()
        ]
        self.out.write(("\r\x1b[Kfetching: " + ", ".join(parts))[:200])
        self.out.flush()


def _mb(size: int | None) -> str:
    return f"{(size or 0) / 1e6:.1f} MB"


# -- sync -------------------------------------------------------------------------------


@dataclass
class Selection:
    root: Path
    address: ProviderAddress
    constraints: Constraints
    version: str | None = None
    locked: bool = False
    lock_hashes: tuple[str, ...] = ()
    error: str = ""
    packages: dict[str, dict[str, Any]] = field(default_factory=dict)


def sync_command(svc: Services, path: Path, platforms: list[str], as_json: bool) -> int:
    chosen = tuple(dict.fromkeys(check_platform(p) for p in platforms))
    roots = read_configurations(path)
    return asyncio.run(_sync(svc.mirror, roots, chosen, as_json))


async def _sync(
    mirror: MirrorService, roots: list[RootConfiguration], platforms: tuple[str, ...], as_json: bool
) -> int:
    report = Reporter(sys.stdout, quiet=as_json)
    try:
        selections = await _select(mirror, roots, report)
        await _fetch(mirror, selections, platforms, report)
    finally:
        await mirror.upstream.aclose()
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


async def _select(
    mirror: MirrorService, roots: list[RootConfiguration], report: Reporter
) -> list[Selection]:
    selections: list[Selection] = []
    for root in roots:
        for note in root.notes:
            report.line(f"note: {note}")
        for address, constraints in sorted(root.requirements.items()):
            selection = Selection(root.path, address, constraints)
            selections.append(selection)
            shown = str(constraints) or "any version"
            try:
                await _choose(mirror, root, selection)
            except GitregError as exc:
                selection.error = str(exc)
                report.line(f"FAIL {address} ({shown}): {exc}")
                continue
            if selection.version is None:
                report.line(f"skip {address}: served from gitreg's own providers")
            else:
                how = "locked" if selection.locked else "newest match"
                report.line(f"{address} {shown} -> {selection.version} ({how}, {root.path})")
    return selections


async def _choose(mirror: MirrorService, root: RootConfiguration, selection: Selection) -> None:
    """Terraform's choice (providercache installer): the lock file's version if it
    still meets the constraints, else the newest version that does."""
    address, constraints = selection.address, selection.constraints
    if mirror.is_local(address):
        return
    mirror.check_allowed(address)
    index = await mirror.current_index(address, force=True)
    available = [parse_version(v.version) for v in index.versions]
    locked = root.locks.get(address)
    chosen: Version | None
    if locked is not None:
        if not constraints.allows(locked.version):
            raise GitregError(
                f"the lock file selects {locked.version}, which does not meet {constraints};"
                " terraform init would fail too (run terraform init -upgrade)"
            )
        if locked.version not in available:
            raise NotFound(f"the locked version {locked.version} is not offered upstream")
        chosen, selection.locked, selection.lock_hashes = locked.version, True, locked.hashes
    else:
        chosen = constraints.newest(available)
    if chosen is None:
        raise NotFound(f"no available version matches {str(constraints) or 'any version'}")
    selection.version = str(chosen)


async def _fetch(
    mirror: MirrorService,
    selections: list[Selection],
    platforms: tuple[str, ...],
    report: Reporter,
) -> None:
    jobs: dict[tuple[ProviderAddress, str, str], list[Selection]] = {}
    for selection in selections:
        if selection.error or selection.version is None:
            continue
        index = await mirror.current_index(selection.address)
        listed = next(v for v in index.versions if v.version == selection.version)
        wanted = platforms or tuple(
            p for p in mirror.options.platforms if not listed.platforms or p in listed.platforms
        )
        for platform in wanted:
            jobs.setdefault((selection.address, selection.version, platform), []).append(selection)

    async def one(address: ProviderAddress, version: str, platform: str) -> None:
        label = f"{address} {version} {platform}"
        try:
            package = await mirror.ensure_package(
                address, version, platform, report.progress(label)
            )
        except GitregError as exc:
            result: dict[str, Any] = {"status": "failed", "error": str(exc)}
            report.line(f"FAIL {label}: {exc}")
        else:
            result = {"status": "ok", "h1": package.h1, "zh": package.zh, "size": package.size}
            report.line(f"  ok {label} ({_mb(package.size)}, signed by {package.key_id})")
            for selection in jobs[(address, version, platform)]:
                _check_lock(selection, package, report)
        finally:
            report.finished(label)
        for selection in jobs[(address, version, platform)]:
            selection.packages[platform] = result

    await asyncio.gather(*(one(*job) for job in jobs))


def _check_lock(selection: Selection, package: MirrorPackage, report: Reporter) -> None:
    # `terraform init` refuses a package matching none of the lock file's hashes.
    if selection.lock_hashes and not {package.h1, package.zh} & set(selection.lock_hashes):
        report.line(
            f"warning: {selection.address} {package.version} {package.platform} matches none of"
            f" the hashes in {selection.root}/.terraform.lock.hcl; terraform init would refuse it"
        )


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
    result = export_static(svc.mirror, dest, chosen)
    for note in result.notes:
        print(f"note: {note}")
    print(
        f"exported {result.providers} provider(s), {result.versions} version(s),"
        f" {result.packages} package(s) ({_mb(result.bytes_written)} written) to {dest}"
    )
    print(
        "serve it over https as a network_mirror, or point a filesystem_mirror at it"
        " (its zips are in the packed layout); see docs/mirror.md"
    )
    # Cached public modules go along for another gitreg (docs/module-proxy.md).
    modules = export_modules(svc.module_proxy.store, svc.blobs, dest)
    if modules.versions:
        print(
            f"exported {modules.versions} cached module version(s) to {dest / 'modules'};"
            " load them with `gitreg modules import`"
        )
    return 0


def list_command(svc: Services, as_json: bool) -> int:
    store = svc.mirror.store
    rows: list[dict[str, Any]] = [
        {
            "provider": key,
            "version": p.version,
            "platform": p.platform,
            "size": p.size,
            "hashes": [p.h1, p.zh],
            "signed_by": p.key_id,
        }
        for key in store.cached_provider_keys()
        for p in store.packages(key)
    ]
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("the mirror cache is empty; fill it with `gitreg mirror sync PATH`")
    for row in rows:
        print(f"{row['provider']} {row['version']} {row['platform']} {_mb(row['size'])}")
    return 0

"""`gitreg mirror sync PATH`: `terraform providers mirror`, into the server's cache.

It reads the configuration (gitreg.mirror.config), picks the versions
`terraform init` would pick (gitreg.versions), and fetches and verifies their
packages for the chosen platforms, reporting each as it ends.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gitreg.addresses import ProviderAddress
from gitreg.errors import GitregError, NotFound
from gitreg.mirror.config import RootConfiguration, read_configurations
from gitreg.mirror.store import CachedIndex, MirrorPackage
from gitreg.mirror.upstream import Progress
from gitreg.versions import Constraints, Version, parse_version


class SyncReport(Protocol):
    """Where a sync says what it does, as it does it."""

    def line(self, text: str) -> None: ...

    def progress(self, label: str) -> Progress: ...

    def finished(self, label: str) -> None: ...


class Mirror(Protocol):
    """What a sync asks of the mirror (gitreg.mirror.service.MirrorService)."""

    def is_local(self, address: ProviderAddress) -> bool: ...

    def check_allowed(self, address: ProviderAddress) -> None: ...

    async def current_index(self, address: ProviderAddress, force: bool = False) -> CachedIndex: ...

    async def ensure_package(
        self,
        address: ProviderAddress,
        version: str,
        platform: str,
        progress: Progress | None = None,
    ) -> MirrorPackage: ...


@dataclass
class Selection:
    """One provider requirement of one root module, and what the sync did for it."""

    root: Path
    address: ProviderAddress
    constraints: Constraints
    version: str | None = None
    locked: bool = False
    lock_hashes: tuple[str, ...] = ()
    error: str = ""
    packages: dict[str, dict[str, Any]] = field(default_factory=dict)


def megabytes(size: int | None) -> str:
    return f"{(size or 0) / 1e6:.1f} MB"


async def sync_configurations(
    mirror: Mirror,
    path: Path,
    platforms: tuple[str, ...],
    configured: tuple[str, ...],
    report: SyncReport,
) -> list[Selection]:
    """Choose and fetch the packages of every provider the configurations under
    `path` require, for `platforms` (else those of `configured` the version
    offers). A failure is recorded on its selection, never raised."""
    roots = read_configurations(path)
    selections = await _select(mirror, roots, report)
    await _fetch(mirror, selections, platforms, configured, report)
    return selections


async def _select(
    mirror: Mirror, roots: list[RootConfiguration], report: SyncReport
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


async def _choose(mirror: Mirror, root: RootConfiguration, selection: Selection) -> None:
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
    mirror: Mirror,
    selections: list[Selection],
    platforms: tuple[str, ...],
    configured: tuple[str, ...],
    report: SyncReport,
) -> None:
    """Fetch each chosen package once, however many selections want it."""
    jobs: dict[tuple[ProviderAddress, str, str], list[Selection]] = {}
    for selection in selections:
        if selection.error or selection.version is None:
            continue
        index = await mirror.current_index(selection.address)
        listed = next(v for v in index.versions if v.version == selection.version)
        wanted = platforms or tuple(
            p for p in configured if not listed.platforms or p in listed.platforms
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
            report.line(f"  ok {label} ({megabytes(package.size)}, signed by {package.key_id})")
            for selection in jobs[(address, version, platform)]:
                _check_lock(selection, package, report)
        finally:
            report.finished(label)
        for selection in jobs[(address, version, platform)]:
            selection.packages[platform] = result

    await asyncio.gather(*(one(*job) for job in jobs))


def _check_lock(selection: Selection, package: MirrorPackage, report: SyncReport) -> None:
    # `terraform init` refuses a package matching none of the lock file's hashes.
    if selection.lock_hashes and not {package.h1, package.zh} & set(selection.lock_hashes):
        report.line(
            f"warning: {selection.address} {package.version} {package.platform} matches none of"
            f" the hashes in {selection.root}/.terraform.lock.hcl; terraform init would refuse it"
        )

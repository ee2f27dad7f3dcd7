"""`gitreg mirror export DIR`: the mirror as a static website (spec: provider-
network-mirror-protocol.md, "Provider Mirror as a Static Website").

Layout, as `terraform providers mirror` writes it:

    DIR/HOSTNAME/NAMESPACE/TYPE/index.json
    DIR/HOSTNAME/NAMESPACE/TYPE/VERSION.json
    DIR/HOSTNAME/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip

Served over https with `.json` as `application/json`, it is a network mirror;
the zips are also in a filesystem mirror's "packed" layout. Only packages the
mirror holds are listed, so every listed version installs offline. Files are
written to a temporary name and renamed, and zips already present with the
right size and sha256 are kept, so re-exporting into the same DIR is cheap.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gitreg.canonical_json import json_bytes
from gitreg.mirror.bodies import archive_filename
from gitreg.mirror.hosted import HostedPackage, HostedProvider
from gitreg.mirror.store import MirrorIndex
from gitreg.storage.blobs import BlobStore
from gitreg.versions import parse_version


@dataclass
class ExportResult:
    providers: int = 0
    versions: int = 0
    packages: int = 0
    bytes_written: int = 0
    notes: list[str] = field(default_factory=list)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".export-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _same_file(path: Path, sha256: str, size: int) -> bool:
    if not path.is_file() or path.stat().st_size != size:
        return False
    digest = hashlib.sha256()
    with path.open("rb") as existing:
        while chunk := existing.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest() == sha256


def _copy_blob(blobs: BlobStore, sha256: str, target: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".export-")
    try:
        with os.fdopen(fd, "wb") as out, blobs.open(sha256) as blob:
            shutil.copyfileobj(blob, out, 1024 * 1024)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _write_provider(
    blobs: BlobStore,
    directory: Path,
    type_: str,
    versions: Mapping[str, Iterable[HostedPackage]],
    platforms: tuple[str, ...],
    result: ExportResult,
) -> None:
    kept: dict[str, list[HostedPackage]] = {}
    for version, packages in versions.items():
        chosen = [p for p in packages if not platforms or p.platform in platforms]
        if chosen:
            kept[version] = chosen
    if not kept:
        return
    directory.mkdir(parents=True, exist_ok=True)
    for version, packages in kept.items():
        archives = {}
        for package in packages:
            name = archive_filename(type_, version, package.platform)
            target = directory / name
            if not _same_file(target, package.sha256, package.size):
                _copy_blob(blobs, package.sha256, target)
                result.bytes_written += package.size
            archives[package.platform] = {
                "url": name,
                "hashes": [package.h1, f"zh:{package.sha256}"],
            }
            result.packages += 1
        _atomic_write(directory / f"{version}.json", json_bytes({"archives": archives}))
        result.versions += 1
    listed = sorted(kept, key=parse_version)
    _atomic_write(directory / "index.json", json_bytes({"versions": {v: {} for v in listed}}))
    result.providers += 1


def export_static(
    store: MirrorIndex,
    blobs: BlobStore,
    hosted: list[HostedProvider],
    hostnames: list[str],
    dest: Path,
    platforms: tuple[str, ...],
) -> ExportResult:
    """Write the cached packages, and gitreg's own providers under each of
    `hostnames`, for `platforms` (every platform when empty)."""
    result = ExportResult()
    dest.mkdir(parents=True, exist_ok=True)
    for key in store.cached_provider_keys():
        hostname, namespace, type_ = key.split("/")
        grouped: dict[str, list[HostedPackage]] = {}
        for p in store.packages(key):
            grouped.setdefault(p.version, []).append(HostedPackage.from_mirror(p))
        _write_provider(
            blobs, dest / hostname / namespace / type_, type_, dict(grouped), platforms, result
        )
    if hosted and not hostnames:
        result.notes.append(
            "gitreg's own providers were not exported: set public_url or mirror_hostnames"
            " to name the hostname they are installed from"
        )
    for hostname in hostnames:
        for provider in hosted:
            directory = dest / hostname / provider.namespace / provider.type
            versions = {v: list(ps) for v, ps in provider.versions.items()}
            _write_provider(blobs, directory, provider.type, versions, platforms, result)
    return result

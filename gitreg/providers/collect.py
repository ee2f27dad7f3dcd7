"""Gathering one provider version's files into a candidate for publishing.

Files arrive three ways: a goreleaser dist/ directory (`gitreg provider
publish DIR`), a staged CI upload (`gitreg/providers/uploads.py`), and a forge
release's assets, downloaded here. All three end as one `ReleaseFiles`,
sorted by goreleaser's file names (`names.classify`); nothing is checked
beyond the names and the read caps, which is `verify`'s job.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gitreg.errors import BadRequest
from gitreg.providers.checksums import MAX_SHASUMS_BYTES, parse_shasums
from gitreg.providers.forges import Asset, Release, ReleaseSource
from gitreg.providers.names import FileKind, classify
from gitreg.providers.signing import MAX_SIGNATURE_BYTES
from gitreg.providers.store import ProviderIndex, ProviderRecord

MAX_MANIFEST_BYTES = 64 * 1024


@dataclass
class ReleaseFiles:
    """Local files of one release, sorted by what they are."""

    zips: dict[str, Path] = field(default_factory=dict)
    platforms: dict[str, tuple[str, str]] = field(default_factory=dict)
    shasums: Path | None = None
    signature: Path | None = None
    manifest: Path | None = None
    # A forge release of a version already published: only SHA256SUMS was
    # fetched, and its listing decides between no-op and conflict.
    listed_only: bool = False

    def add(self, path: Path, type_: str, version: str, strict: bool) -> None:
        kind, platform = classify(path.name, type_, version)
        if kind is FileKind.PACKAGE and platform is not None:
            self.zips[path.name] = path
            self.platforms[path.name] = platform
        elif kind is FileKind.SHASUMS:
            self._single("shasums", path)
        elif kind is FileKind.SIGNATURE:
            self._single("signature", path)
        elif kind is FileKind.MANIFEST:
            self._single("manifest", path)
        elif strict:
            raise BadRequest(
                f"{path.name[:120]!r} is not a file of terraform-provider-{type_} {version}:"
                " expected"
                f" terraform-provider-{type_}_{version}_OS_ARCH.zip, *_{version}_SHA256SUMS,"
                f" *_{version}_SHA256SUMS.sig or *_{version}_manifest.json"
            )

    def _single(self, attr: str, path: Path) -> None:
        current = getattr(self, attr)
        if current is not None and current.name != path.name:
            raise BadRequest(f"two {attr} files: {current.name} and {path.name}")
        setattr(self, attr, path)


def collect(paths: Iterable[Path], type_: str, version: str, strict: bool) -> ReleaseFiles:
    """Sort local files (a dist/ directory, a staged upload) into a `ReleaseFiles`;
    with `strict`, a file that is not one of the version's refuses the lot."""
    files = ReleaseFiles()
    for path in sorted(paths):
        files.add(path, type_, version, strict)
    return files


def download_release(
    store: ProviderIndex,
    provider: ProviderRecord,
    version: str,
    release: Release,
    source: ReleaseSource,
    into: Path,
    max_package_bytes: int,
) -> ReleaseFiles | str:
    """The release's files downloaded into `into`, or why it is not complete yet.

    For a version already published only SHA256SUMS is needed: `publish`
    compares its listing with the stored packages (no-op or 409), so a
    replayed release costs one small download."""
    assets: dict[str, Asset] = {}
    by_kind: dict[FileKind, str] = {}
    for asset in release.assets:
        kind, _ = classify(asset.name, provider.type, version)
        if kind is FileKind.OTHER:
            continue
        if not asset.ready:
            return f"asset {asset.name} is still uploading"
        assets[asset.name] = asset
        if kind is not FileKind.PACKAGE:
            by_kind[kind] = asset.name
    if FileKind.SHASUMS not in by_kind:
        return f"waiting for the *_{version}_SHA256SUMS asset"
    if FileKind.SIGNATURE not in by_kind and not provider.sign_releases:
        return f"waiting for the *_{version}_SHA256SUMS.sig asset (or register with --sign)"
    sums = assets[by_kind[FileKind.SHASUMS]]
    with (into / sums.name).open("wb") as out:
        source.download(sums, out, MAX_SHASUMS_BYTES)
    listed = parse_shasums((into / sums.name).read_bytes())
    needed = {
        name
        for name in listed
        if classify(name, provider.type, version)[0] in (FileKind.PACKAGE, FileKind.MANIFEST)
    }
    missing = sorted(needed - set(assets))
    if missing:
        return f"waiting for assets listed in SHA256SUMS: {', '.join(missing[:10])}"
    if store.provider_version(provider.id, version) is not None:
        files = collect([into / sums.name], provider.type, version, strict=False)
        files.listed_only = True
        return files
    caps = {FileKind.SIGNATURE: MAX_SIGNATURE_BYTES, FileKind.MANIFEST: MAX_MANIFEST_BYTES}
    for name, asset in sorted(assets.items()):
        kind, _ = classify(name, provider.type, version)
        if name == sums.name or (kind is FileKind.PACKAGE and name not in listed):
            continue
        with (into / name).open("wb") as out:
            source.download(asset, out, caps.get(kind, max_package_bytes))
    return collect(into.iterdir(), provider.type, version, strict=False)

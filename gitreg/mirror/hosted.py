"""gitreg's own providers (gitreg.providers) as seen by the mirror.

Providers published to gitreg appear in the mirror under gitreg's own
hostnames (the host of `public_url`, plus `mirror_hostnames`), with the same
zips and the `h1:`/`zh:` hashes computed when they were published. Blocking:
callers run these in a thread (the metadata cache does).
"""

from __future__ import annotations

from dataclasses import dataclass

from gitreg.errors import ConstraintError
from gitreg.mirror.store import MirrorPackage
from gitreg.providers.store import ProviderIndex
from gitreg.versions import parse_version


@dataclass(frozen=True)
class HostedPackage:
    platform: str
    filename: str
    sha256: str
    size: int
    h1: str

    @classmethod
    def from_mirror(cls, package: MirrorPackage) -> HostedPackage:
        """A package pulled through from an upstream, listed as gitreg's own are
        (VERSION.json, the static export): the same fields, the same hashes."""
        return cls(package.platform, package.filename, package.sha256, package.size, package.h1)


@dataclass(frozen=True)
class HostedProvider:
    namespace: str
    type: str
    versions: dict[str, tuple[HostedPackage, ...]]  # version -> packages, yanked ones included
    yanked: frozenset[str] = frozenset()  # left out of index.json, still served by version


class HostedProviders:
    def __init__(self, store: ProviderIndex) -> None:
        self._store = store

    def provider(self, namespace: str, type_: str) -> HostedProvider | None:
        record = self._store.find_provider(f"{namespace}/{type_}")
        if record is None:
            return None
        packages = self._store.packages_by_version(record.id)
        versions: dict[str, tuple[HostedPackage, ...]] = {}
        yanked = set()
        for version in self._store.provider_versions(record.id):
            try:
                parse_version(version.version)
            except ConstraintError:
                continue
            versions[version.version] = tuple(
                HostedPackage(f"{p.os}_{p.arch}", p.filename, p.sha256, p.size, p.h1)
                for p in packages.get(version.id, [])
            )
            if version.yanked:
                yanked.add(version.version)
        return HostedProvider(
            record.namespace.lower(), record.type.lower(), versions, frozenset(yanked)
        )

    def all(self) -> list[HostedProvider]:
        found = []
        for record in self._store.providers():
            hosted = self.provider(record.namespace, record.type)
            if hosted is not None:
                found.append(hosted)
        return found

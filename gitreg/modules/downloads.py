"""Where Terraform downloads a module version from (module-registry-protocol.md,
"Download Source Code for a Specific Module Version").

The answer is an absolute archive URL: `base` (the registry's public address,
which the HTTP layer knows) + `/archives/<sha256>.tar.gz`, then `//subdir` for
a module in a monorepo directory, then a signature when the namespace is
private. Lookups go through the metadata cache, keyed on the path values as
sent, so a hit does no validation, version parsing or database work
(docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from gitreg.addresses import ModuleAddress, module_address
from gitreg.auth.service import Access, PrincipalSource
from gitreg.cache import MISSING, MetadataCache
from gitreg.errors import BadRequest, NotAVersion, NotFound
from gitreg.metrics import service as metrics
from gitreg.storage.protocols import ModuleIndex
from gitreg.versions import parse_tag_version


class ModuleArchive(NamedTuple):
    """What a module version's download points at (cached per path)."""

    sha256: str
    subdir: str


def archive_path(sha256: str) -> str:
    return f"/archives/{sha256}.tar.gz"


def _cache_key(namespace: str, name: str, system: str, version: str) -> tuple[str, ...]:
    """The path values as sent, names case-folded (versions are not: semver
    prerelease identifiers are case-sensitive). A hit skips validation and
    version parsing, since an entry exists only for input that was valid when it
    was built; `1.0.0` and `v1.0.0` simply get separate entries."""
    return ("module-download", namespace.lower(), name.lower(), system.lower(), version)


def _not_found(namespace: str, name: str, system: str, version: str = "") -> str:
    address = f"{namespace}/{name}/{system}"
    return (
        f"module {address} has no version {version[:64]}"
        if version
        else f"module {address} not found"
    )


def _find(index: ModuleIndex, address: ModuleAddress, key: str) -> ModuleArchive | None:
    module = index.find_module(address.namespace, address.name, address.system)
    if module is None:
        return None
    found = index.version_by_key(module.id, key)
    return ModuleArchive(found.archive_sha256, module.subdir) if found else None


class ModuleDownloads:
    """Resolves `download` for one registry. Two entry points, so that the hot
    path stays synchronous: `cached_location` answers a cache hit in a public
    namespace with no await; `location` answers everything else."""

    def __init__(self, index: ModuleIndex, cache: MetadataCache[object], access: Access) -> None:
        self._index = index
        self._cache = cache
        self._access = access

    def cached_location(
        self, namespace: str, name: str, system: str, version: str, base: str
    ) -> str | None:
        """The location from the cache when the namespace is known public
        (NotFound for a cached miss); None when `location` must decide."""
        found = self._cache.peek(_cache_key(namespace, name, system, version))
        if found is MISSING or not self._access.known_public(namespace):
            return None
        if found is None:
            raise NotFound(_not_found(namespace, name, system, version))
        assert isinstance(found, ModuleArchive)
        metrics.downloaded("module", f"{namespace}/{name}/{system}".lower())
        return self._location(found, base, private=False)

    async def location(
        self,
        namespace: str,
        name: str,
        system: str,
        version: str,
        base: str,
        who: PrincipalSource,
    ) -> str:
        """The location for a reader `who` may be: BadRequest for a malformed
        address or version, 401/NotFound as `Access.check_read` decides,
        NotFound for an unknown module or version."""
        key = _cache_key(namespace, name, system, version)
        not_found = _not_found(namespace, name, system)
        found = self._cache.peek(key)
        if found is MISSING:
            address = module_address(namespace, name, system)
            lookup = self._lookup(address, version)
            private = await self._access.check_read(address.namespace, not_found, who)
            found = await self._cache.get(key, lookup)
        else:
            private = await self._access.check_read(namespace, not_found, who)
        if found is None:
            raise NotFound(_not_found(namespace, name, system, version))
        assert isinstance(found, ModuleArchive)
        metrics.downloaded("module", f"{namespace}/{name}/{system}".lower())
        return self._location(found, base, private)

    def _lookup(self, address: ModuleAddress, version: str) -> Callable[[], object]:
        """The database lookup for a cache miss; the version is checked first
        (400 before the access check, as for a malformed address)."""
        try:
            key = str(parse_tag_version(version).without_build())
        except NotAVersion as exc:
            raise BadRequest(str(exc)) from exc
        return lambda: _find(self._index, address, key)

    def _location(self, archive: ModuleArchive, base: str, private: bool) -> str:
        # `//subdir` selects a directory inside the archive, so a monorepo module
        # keeps its relative references such as `../common` (go-getter subdirs).
        location = base + archive_path(archive.sha256)
        if archive.subdir:
            location += "//" + archive.subdir
        if private:
            # Terraform fetches the archive without credentials: the URL carries a
            # time-limited signature instead. go-getter moves a query string
            # after `//subdir` back onto the archive URL.
            location += "?" + self._access.signer.sign(archive_path(archive.sha256))
        return location

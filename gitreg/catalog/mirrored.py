"""What the provider network mirror and the module proxy hold, as the catalog
lists it: one entry per provider or module, its versions newest first."""

from __future__ import annotations

from dataclasses import dataclass

from gitreg.errors import BadRequest
from gitreg.mirror.store import MirrorIndex
from gitreg.module_proxy.store import ModuleProxyIndex
from gitreg.versions import Version, sort_key


@dataclass(frozen=True)
class Mirrored:
    """One provider or module held by the network mirror or the module proxy."""

    namespace: str  # the upstream namespace: its visibility decides who sees it
    address: str
    versions: tuple[str, ...]
    detail: str


def mirrored_providers(mirror: MirrorIndex) -> list[Mirrored]:
    """Every provider with a cached package, by address, its platforms as `detail`."""
    found: list[Mirrored] = []
    for key in sorted(mirror.cached_provider_keys()):
        packages = mirror.packages(key)
        if not packages:
            continue
        versions: dict[str, set[str]] = {}
        for package in packages:
            versions.setdefault(package.version, set()).add(package.platform)
        ordered = sorted(versions, key=_version_order, reverse=True)
        platforms = sorted({p for held in versions.values() for p in held})
        found.append(Mirrored(key.split("/")[1], key, tuple(ordered), ", ".join(platforms)))
    return found


def proxied_modules(proxied: ModuleProxyIndex) -> list[Mirrored]:
    """Every module with a cached version, by `host/namespace/name/system`."""
    modules: dict[str, list[str]] = {}
    namespaces: dict[str, str] = {}
    for version in proxied.versions():
        address = f"{version.host}/{version.namespace}/{version.name}/{version.system}"
        modules.setdefault(address, []).append(version.version)
        namespaces[address] = version.namespace
    return [
        Mirrored(namespaces[a], a, tuple(sorted(v, key=_version_order, reverse=True)), "")
        for a, v in sorted(modules.items())
    ]


def _version_order(version: str) -> Version:
    try:
        return sort_key(version)
    except BadRequest:  # stored by an older release under looser rules: sorts last
        return sort_key("0.0.0")

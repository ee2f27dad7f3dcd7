"""What the pages show, read through gitreg/catalog/records.py and the
services, and kept in the metadata cache (invalidated on publish).

Values here are unfiltered, like the browse API's: every handler drops what
its reader may not see (`Viewer.may_read`) before anything is rendered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool

from gitreg.addresses import module_address
from gitreg.catalog.http import cached_provider_record, listing
from gitreg.catalog.records import (
    Listed,
    full_record,
    listed_versions,
    provider_doc,
)
from gitreg.catalog.search_cache import SEARCH_CANDIDATES
from gitreg.errors import BadRequest
from gitreg.services import Services
from gitreg.versions import Version, sort_key


@dataclass(frozen=True)
class ModuleData:
    record: dict[str, Any]
    yanked: bool
    moved: tuple[str, ...]  # commits the version's tag was later seen at (G4)


@dataclass(frozen=True)
class Mirrored:
    """One provider or module held by the network mirror or the module proxy."""

    namespace: str  # the upstream namespace: its visibility decides who sees it
    address: str
    versions: tuple[str, ...]
    detail: str


async def listed(svc: Services) -> list[Listed]:
    return (await listing(svc)).modules


async def search_hits(svc: Services, query: str, hidden: frozenset[str]) -> list[tuple[int, str]]:
    """The best matches outside the `hidden` namespaces (`hidden_namespaces`),
    in the search LRU the browse API uses: kept in the metadata cache, a
    stream of made-up queries from the search page would push out every
    cached `versions` and `download` answer (gitreg/catalog/search_cache.py)."""
    return await svc.searches.get(
        (query.lower(), hidden), lambda: svc.catalog.search(query, SEARCH_CANDIDATES, hidden)
    )


def _load_module(
    svc: Services, names: tuple[str, str, str], version: str | None
) -> ModuleData | None:
    try:
        addr = module_address(*names)
    except BadRequest:
        return None
    module = svc.index.find_module(addr.namespace, addr.name, addr.system)
    if module is None:
        return None
    if version is None:
        versions = listed_versions(svc.index, module)
        chosen = versions[0] if versions else None
    else:
        # Exact version, yanked ones included: they stay downloadable (issue 15).
        chosen = next((v for v in svc.index.versions(module.id) if v.version == version), None)
    if chosen is None:
        return None
    moved = tuple(
        c.seen_commit
        for c in svc.index.conflicts(module.id)
        if c.version == chosen.version or c.tag == chosen.tag
    )
    return ModuleData(full_record(svc.index, svc.catalog, module, chosen), chosen.yanked, moved)


async def module(
    svc: Services, names: tuple[str, str, str], version: str | None
) -> ModuleData | None:
    key = ("ui-module", *(n.lower() for n in names), version)
    found = await svc.cache.get(key, lambda: _load_module(svc, names, version))
    assert found is None or isinstance(found, ModuleData)
    return found


async def provider(svc: Services, namespace: str, type_: str) -> dict[str, Any] | None:
    """The browse API's cached record: the same entry, not a second copy of it."""
    return await cached_provider_record(svc, namespace, type_)


async def provider_page_doc(
    svc: Services, namespace: str, type_: str, version: str, doc_id: str
) -> dict[str, Any] | None:
    """One documentation page of a provider version, with its sanitised `html`.
    Not kept in the metadata cache (a page may be up to 2 MiB): the rendered
    page is cached instead, like every other page."""
    return await run_in_threadpool(
        provider_doc, svc.providers.store, svc.provider_docs, namespace, type_, version, doc_id
    )


async def providers(svc: Services) -> list[tuple[str, str]]:
    """(namespace, type) of every hosted provider with a listed version."""

    def load() -> list[tuple[str, str]]:
        store = svc.providers.store
        found = [
            (p.namespace, p.type)
            for p in store.providers()
            if any(not v.yanked for v in store.provider_versions(p.id))
        ]
        return sorted(found, key=lambda p: (p[0].lower(), p[1].lower()))

    found = await svc.cache.get(("ui-providers",), load)
    assert isinstance(found, list)
    return found


def _load_mirrored(svc: Services) -> tuple[list[Mirrored], list[Mirrored]]:
    """What the provider network mirror and the module proxy hold on disk."""
    cached: dict[str, dict[str, set[str]]] = {}
    for package in svc.mirror.cached_packages():
        cached.setdefault(package.provider_key, {})
        cached[package.provider_key].setdefault(package.version, set()).add(package.platform)
    providers: list[Mirrored] = []
    for key, versions in sorted(cached.items()):
        ordered = sorted(versions, key=_version_order, reverse=True)
        platforms = sorted({p for found in versions.values() for p in found})
        providers.append(Mirrored(key.split("/")[1], key, tuple(ordered), ", ".join(platforms)))
    modules: dict[str, list[str]] = {}
    namespaces: dict[str, str] = {}
    for proxied in svc.module_proxy.cached_versions():
        address = f"{proxied.host}/{proxied.namespace}/{proxied.name}/{proxied.system}"
        modules.setdefault(address, []).append(proxied.version)
        namespaces[address] = proxied.namespace
    proxied_modules = [
        Mirrored(namespaces[a], a, tuple(sorted(v, key=_version_order, reverse=True)), "")
        for a, v in sorted(modules.items())
    ]
    return providers, proxied_modules


def _version_order(version: str) -> Version:
    try:
        return sort_key(version)
    except BadRequest:  # stored by an older release under looser rules: sorts last
        return sort_key("0.0.0")


async def mirrored(svc: Services) -> tuple[list[Mirrored], list[Mirrored]]:
    found = await svc.cache.get(("ui-mirror",), lambda: _load_mirrored(svc))
    assert isinstance(found, tuple)
    return found

"""The catalog: what the browse API, the web UI and `gitreg reindex` ask of
module and provider documentation and search.

Lists, search answers and provider records are built from the stores and
kept in the metadata cache (invalidated on publish): one entry serves the API
and the UI alike. Values are unfiltered except where a method takes
`visible`, the reader's "may I read this namespace" (built by the HTTP layer
from the request's credentials): a private namespace the reader may not see
is then left out before anything is counted or paged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gitreg.addresses import module_address
from gitreg.cache import MetadataCache
from gitreg.catalog.archive_files import ArchiveFile, FileCache, clean_path, read_files
from gitreg.catalog.mirrored import Mirrored, mirrored_providers, proxied_modules
from gitreg.catalog.records import (
    Listed,
    ModuleView,
    Provenance,
    all_listed,
    choose_release,
    hosted_providers,
    module_view,
    provider_doc,
    provider_record,
)
from gitreg.catalog.reindex import Progress, Reindexed, Reindexer
from gitreg.catalog.search_cache import SEARCH_CANDIDATES, Listing, SearchCache
from gitreg.catalog.store import CatalogIndex, ProviderDocsIndex
from gitreg.errors import BadRequest
from gitreg.mirror.store import MirrorIndex
from gitreg.module_proxy.store import ModuleProxyIndex
from gitreg.providers.store import ProviderIndex
from gitreg.storage.blobs import BlobStore
from gitreg.storage.protocols import ModuleIndex

Visible = Callable[[str], bool]


@dataclass(frozen=True)
class ProviderRelease:
    """One release of a hosted provider as the browse API answers for it."""

    provider_id: int  # whose download total the answer shows
    body: dict[str, Any]  # the release entry with `namespace`, `name` and `versions`


class Catalog:
    def __init__(
        self,
        *,
        index: ModuleIndex,
        catalog: CatalogIndex,
        provider_docs: ProviderDocsIndex,
        providers: ProviderIndex,
        mirror: MirrorIndex,
        proxied: ModuleProxyIndex,
        cache: MetadataCache[object],
        searches: SearchCache,
        reindexer: Reindexer,
        blobs: BlobStore,
        provenance: Provenance | None = None,
        semver: Callable[[int], dict[str, dict[str, Any]]] = lambda _module_id: {},
    ) -> None:
        self._provenance = provenance  # what a version's signed statement says, for its record
        self._index = index
        self._catalog = catalog
        self._provider_docs = provider_docs
        self._providers = providers
        self._mirror = mirror
        self._proxied = proxied
        self._cache = cache
        self._searches = searches
        self._reindexer = reindexer
        self._blobs = blobs
        self._files = FileCache()
        self._semver = semver  # a module's versions labelled breaking, by version

    async def listing(self) -> Listing:
        """Every listed module, unfiltered: one snapshot per publish."""
        found = await self._cache.snapshot(
            ("listed",), lambda: Listing.of(all_listed(self._index, self._catalog))
        )
        assert isinstance(found, Listing)
        return found

    async def modules(
        self, visible: Visible, namespace: str | None = None, name: str | None = None
    ) -> list[Listed]:
        """The listed modules the reader may see, ordered by namespace, name
        and system; only those of `namespace` and `name` (case aside) when given."""
        found = (await self.listing()).modules
        if namespace is not None:
            found = [m for m in found if m.namespace.lower() == namespace.lower()]
        if name is not None:
            found = [m for m in found if m.record["name"].lower() == name.lower()]
        return [m for m in found if visible(m.namespace)]

    async def search(self, query: str, visible: Visible) -> list[Listed]:
        """The listed modules matching `query` that the reader may see, best
        first, at most SEARCH_CANDIDATES. Answers are kept per query and per
        set of hidden namespaces in a cache of their own: in the metadata
        cache, a stream of made-up queries would push out every cached
        `versions` and `download` answer (gitreg/catalog/search_cache.py)."""
        listed = await self.listing()
        hidden = listed.hidden(visible)
        hits = await self._searches.get(
            (query.lower(), hidden),
            lambda: self._catalog.search(query, SEARCH_CANDIDATES, hidden),
        )
        return listed.found(hits, visible)

    def module_version(self, names: tuple[str, str, str], version: str | None) -> ModuleView | None:
        """`version` of the module `names` (namespace, name, system), or its
        newest listed one when `version` is None, read now from the stores (for
        a caller that caches what it makes of it); None when there is no such
        module or version. Raises BadRequest when `names` is not a module address."""
        found = module_view(self._index, self._catalog, names, version, self._provenance)
        if found is not None:
            # The semver guard's label of this version, and which listed versions have one.
            labelled = self._semver(found.module_id)
            found.record["semver"] = labelled.get(found.record["version"])
            found.record["breaking_versions"] = [
                v for v in found.record["versions"] if v in labelled
            ]
        return found

    async def module(self, names: tuple[str, str, str], version: str | None) -> ModuleView | None:
        """`module_version`, kept in the metadata cache; None also when `names`
        is not a module address, as for a module that does not exist."""
        key = ("ui-module", *(n.lower() for n in names), version)
        found = await self._cache.get(key, lambda: self._module_or_none(names, version))
        assert found is None or isinstance(found, ModuleView)
        return found

    def _module_or_none(
        self, names: tuple[str, str, str], version: str | None
    ) -> ModuleView | None:
        try:
            return self.module_version(names, version)
        except BadRequest:
            return None

    async def provider(self, namespace: str, type_: str) -> dict[str, Any] | None:
        """A hosted provider's whole record (`provider_record`, with every
        release and its documentation listing); None when there is none."""
        key = _provider_key(namespace, type_)
        found = await self._cache.get(key, lambda: self._provider_record(key))
        assert found is None or isinstance(found, dict)
        return found

    def provider_release(
        self, namespace: str, type_: str, version: str | None
    ) -> ProviderRelease | None:
        """`version` of a hosted provider (a yanked one too), or its newest
        unyanked one when `version` is None; None when there is none. Made from
        the record `provider` holds if it is still cached: one of an older
        generation is never read, so a release made now is never stale."""
        key = _provider_key(namespace, type_)
        found = self._cache.peek(key)
        if not isinstance(found, dict):
            found = self._provider_record(key)
        if found is None:
            return None
        chosen = choose_release(found, version)
        if chosen is None:
            return None
        body = {**chosen, "namespace": found["namespace"], "name": found["name"]}
        body["versions"] = found["versions"]
        return ProviderRelease(found["provider_id"], body)

    def _provider_record(self, key: tuple[str, str, str]) -> dict[str, Any] | None:
        return provider_record(self._providers, self._index, key[1], key[2], self._provider_docs)

    def provider_doc(
        self, namespace: str, type_: str, version: str, doc_id: str
    ) -> dict[str, Any] | None:
        """One documentation page of a provider version: its listing entry and
        `html` (sanitised at ingest); None when there is no such provider,
        version or page. Read now, not cached: a page may be megabytes."""
        return provider_doc(self._providers, self._provider_docs, namespace, type_, version, doc_id)

    async def providers(
        self, visible: Visible, namespace: str | None = None
    ) -> list[tuple[str, str]]:
        """(namespace, type) of every hosted provider with a listed version
        that the reader may see; only those of `namespace` (case aside) when given."""
        found = await self._cache.get(("ui-providers",), lambda: hosted_providers(self._providers))
        assert isinstance(found, list)
        if namespace is not None:
            found = [p for p in found if p[0].lower() == namespace.lower()]
        return [p for p in found if visible(p[0])]

    async def mirrored(self, visible: Visible) -> tuple[list[Mirrored], list[Mirrored]]:
        """What the provider network mirror and the module proxy hold, of the
        upstream namespaces the reader may see: (providers, modules)."""
        found = await self._cache.get(("ui-mirror",), self._mirrored)
        assert isinstance(found, tuple)
        providers, modules = found
        return (
            [p for p in providers if visible(p.namespace)],
            [m for m in modules if visible(m.namespace)],
        )

    def _mirrored(self) -> tuple[list[Mirrored], list[Mirrored]]:
        return mirrored_providers(self._mirror), proxied_modules(self._proxied)

    def module_file(
        self, names: tuple[str, str, str], version: str, path: str
    ) -> ArchiveFile | None:
        """The file `path` (inside the module) of a version's archive, as
        `terraform init` installs it; None when there is no such module,
        version or regular file. Blocking: archive reads (archive_files.py)."""
        wanted = clean_path(path)
        if wanted is None:
            return None
        found = self._version_files(names, version, f"file:{wanted}", lambda p: p == wanted, 1)
        return found[0] if found else None

    def module_directory_files(
        self, names: tuple[str, str, str], version: str, directory: str, suffix: str
    ) -> list[ArchiveFile] | None:
        """The files named `*suffix` directly in `directory` of a version's
        archive (an example's `.tf` files), by name; None when there is no
        such module or version."""
        prefix = f"{directory}/"

        def wanted(path: str) -> bool:
            rest = path[len(prefix) :]
            return path.startswith(prefix) and "/" not in rest and rest.endswith(suffix)

        found = self._version_files(names, version, f"dir:{directory}:{suffix}", wanted)
        return None if found is None else sorted(found, key=lambda f: f.path)

    def _version_files(
        self,
        names: tuple[str, str, str],
        version: str,
        key: str,
        wanted: Callable[[str], bool],
        most: int = 200,
    ) -> list[ArchiveFile] | None:
        try:
            addr = module_address(*names)
        except BadRequest:
            return None
        module = self._index.find_module(addr.namespace, addr.name, addr.system)
        versions = self._index.versions(module.id) if module is not None else []
        chosen = next((v for v in versions if v.version == version), None)
        if module is None or chosen is None:
            return None
        sha = chosen.archive_sha256
        cached = self._files.get((sha, key))
        if cached is not None:
            return [] if cached.path == "" else [cached]
        with self._blobs.open(sha) as raw:
            found = read_files(raw, module.subdir, wanted, most)
        if most == 1:  # a single file (or its absence) is what is kept
            self._files.put((sha, key), found[0] if found else ArchiveFile("", 0, None))
        return found

    def reindex(self, progress: Progress) -> Reindexed:
        """Document the module and provider versions published before
        documentation existed (or under an older format), resumably, and rebuild
        the search rows modules lack (gitreg/catalog/reindex.py)."""
        return self._reindexer.run(progress)


def _provider_key(namespace: str, type_: str) -> tuple[str, str, str]:
    return ("browse-provider", namespace.lower(), type_.lower())

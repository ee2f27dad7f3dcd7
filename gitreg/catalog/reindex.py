"""Documenting versions published before documentation existed.

Versions published before extraction (or under an older document format,
`DOCS_FORMAT`) get their document from the repository's mirror, at the
commit they were published from. Each document is stored as soon as it is
made, and the work list is "versions without a current document", so an
interrupted run resumes where it stopped when started again. Provider
versions without documentation pages are read from their repository at the
release tag. Last, the search rows modules lack are rebuilt: `gitreg
migrate-storage` does not copy them (storage/copy.py, DERIVED_TABLES).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gitreg.catalog.documenter import Documenter, Published
from gitreg.catalog.extract import DOCS_FORMAT
from gitreg.catalog.provider_docs import PROVIDER_DOCS_FORMAT, ProviderDocumenter, tag_of
from gitreg.catalog.store import CatalogIndex, ProviderDocsIndex
from gitreg.providers.store import ProviderIndex
from gitreg.storage.protocols import ModuleIndex
from gitreg.storage.records import RepoRecord

_ALL = 1 << 62  # ids only: even a large registry's work list is small


class Progress(Protocol):
    """Told about each version as it is done, one work list after another."""

    def begin(self, total: int) -> None:
        """A work list of `total` versions starts."""
        ...

    def step(self, done: int, label: str, ok: bool) -> None:
        """The `done`th version (from 1) of the list, named `label`, was
        documented (`ok`) or failed (logged)."""
        ...


@dataclass(frozen=True)
class Reindexed:
    """What a run did: `attempted` module versions lacked a current document;
    `failed` module and provider versions could not be documented (a later run
    tries them again)."""

    attempted: int
    failed: int


class Reindexer:
    def __init__(
        self,
        *,
        index: ModuleIndex,
        catalog: CatalogIndex,
        provider_docs: ProviderDocsIndex,
        providers: ProviderIndex,
        documenter: Documenter,
        provider_documenter: ProviderDocumenter,
        mirror_path: Callable[[RepoRecord], Path],
        on_change: Callable[[], None],
    ) -> None:
        self._index = index
        self._catalog = catalog
        self._provider_docs = provider_docs
        self._providers = providers
        self._documenter = documenter
        self._provider_documenter = provider_documenter
        self._mirror_path = mirror_path  # a module repository's mirror, as published from
        self._on_change = on_change

    def run(self, progress: Progress) -> Reindexed:
        """Document every module and provider version that lacks it, then
        rebuild missing search rows."""
        missing = self._catalog.missing_docs(DOCS_FORMAT, 0, _ALL)
        modules = {m.id: m for m in self._index.modules()}
        progress.begin(len(missing))
        failed = 0
        for done, item in enumerate(missing, 1):
            module = modules.get(item.module_id)
            found = self._index.version_by_key(item.module_id, item.version_key)
            ok = False
            if module is not None and found is not None:
                repo = self._index.repo(module.repo_id)
                version = Published(
                    found.version, item.version_key, found.commit_sha, found.tree_sha
                )
                ok = self._documenter.document(self._mirror_path(repo), repo, module, version)
            failed += not ok
            label = f"{module.address if module else item.module_id} {item.version_key}"
            progress.step(done, label, ok)
        failed += self._provider_versions(progress)
        rebuilt = self._documenter.refresh_stale_search(modules.values())
        if rebuilt:
            self._on_change()
        return Reindexed(len(missing), failed)

    def _provider_versions(self, progress: Progress) -> int:
        """Provider versions without documentation pages; versions of providers
        without a repository (uploads only) have nothing to read and are left
        alone. How many failed."""
        todo = []
        for item in self._provider_docs.undocumented_provider_versions(PROVIDER_DOCS_FORMAT):
            provider = self._providers.provider(item.provider_id)
            if provider.repo_id is not None:
                todo.append((provider, provider.repo_id, item))
        if not todo:
            return 0
        progress.begin(len(todo))
        fetched: dict[int, Path] = {}
        failed = 0
        for done, (provider, repo_id, item) in enumerate(todo, 1):
            version = self._providers.provider_version(provider.id, item.version)
            repo = self._index.repo(repo_id)
            ok = version is not None and self._provider_documenter.document(
                provider, repo, version, tag_of(item.source), fetched
            )
            failed += not ok
            progress.step(done, f"provider {provider.address} {item.version}", ok)
        self._on_change()
        return failed

"""Documenting published module versions: at publish, and by `gitreg reindex`.

The publisher calls `Documenter.document` right after recording a version,
on the mirror it just archived from, and `update_search` at the end of the
module's sync: the versions' documents are made there, one after another, and
stored in one transaction with the search row (bench/catalog.py measures the
overhead). A failure here is logged and leaves the version without a document:
publishing never waits on documentation, and `gitreg reindex` fills the gap later.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitreg.catalog.extract import DOCS_FORMAT, Origin, description, search_text
from gitreg.catalog.paths import module_path
from gitreg.catalog.records import latest_listed, version_key
from gitreg.catalog.reuse import Documents
from gitreg.catalog.store import CatalogIndex, SearchEntry
from gitreg.errors import GitError, GitregError
from gitreg.git.backend import GitBackend
from gitreg.storage.protocols import ModuleIndex
from gitreg.storage.records import ModuleRecord, RepoRecord

log = logging.getLogger("gitreg.catalog")


@dataclass(frozen=True)
class Published:
    """The parts of a version documentation needs."""

    version: str
    version_key: str
    commit_sha: str
    tree_sha: str


@dataclass(frozen=True)
class _Deferred:
    """A version published in this sync, documented by `update_search`."""

    mirror: Path
    repo: RepoRecord
    module: ModuleRecord
    version: Published


class Documenter:
    def __init__(
        self,
        index: ModuleIndex,
        catalog: CatalogIndex,
        git: GitBackend,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self._index = index
        self._catalog = catalog
        self._git = git
        self._on_change = on_change
        # Versions published with `search=False`, per publishing thread, made
        # and stored together by `update_search` (one transaction per sync).
        self._deferred = threading.local()
        # Documents by content: later versions with the same files reuse them.
        self._documents = Documents()

    def document(
        self,
        mirror: Path,
        repo: RepoRecord,
        module: ModuleRecord,
        version: Published,
        search: bool = True,
    ) -> bool:
        """Extract and store one version's document; False if it could not be
        made now (logged: `gitreg reindex` retries) or was already stored.
        With `search` False the version is noted (True) and its document made
        by the caller's `update_search`, called once after publishing several
        versions: it makes and stores them all and refreshes the module's
        search row. Made in a row, after the sync's archives and index writes,
        the reads of one version find the objects, index pages and code of the
        previous one still in the CPU's caches: a quarter less CPU for the
        bench's 40 tags (docs/performance.md, "Extraction at publish")."""
        if not search:
            self._pending().append(_Deferred(mirror, repo, module, version))
            return True
        try:
            return self._document(mirror, repo, module, version)
        except (GitError, GitregError, OSError, KeyError, ValueError) as exc:
            log.warning("no documentation for %s %s: %s", module.address, version.version, exc)
            return False

    def _document(
        self,
        mirror: Path,
        repo: RepoRecord,
        module: ModuleRecord,
        version: Published,
    ) -> bool:
        text = self.build_json(mirror, repo, module, version)
        stored = self._catalog.put_docs(module.id, version.version_key, DOCS_FORMAT, text)
        if self._is_latest(module, version.version_key):
            self._put_search(module, json.loads(text), version.version_key)
        if stored:
            self._on_change()
        return stored

    def build(
        self, mirror: Path, repo: RepoRecord, module: ModuleRecord, version: Published
    ) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.build_json(mirror, repo, module, version))
        return found

    def build_json(
        self, mirror: Path, repo: RepoRecord, module: ModuleRecord, version: Published
    ) -> str:
        """The version's document as stored (json.dumps with sort_keys)."""
        tree = version.tree_sha
        if module.subdir:
            found = self._git.subtree(mirror, tree, module.subdir)
            if found is None:
                raise ValueError(f"subdirectory {module.subdir!r} is missing at this commit")
            tree = found
        page = module_path(module.namespace, module.name, module.system, version.version)
        origin = Origin(repo.url, version.commit_sha, module.subdir, version.version, page)
        with self._git.objects(mirror) as store:
            return self._documents.document(store, tree, origin)

    def _put_search(self, module: ModuleRecord, doc: dict[str, Any], key: str) -> None:
        self._catalog.put_search(_search_entry(module, doc, key))

    def _pending(self) -> list[_Deferred]:
        if not hasattr(self._deferred, "items"):
            self._deferred.items = []
        found: list[_Deferred] = self._deferred.items
        return found

    def _made(self, deferred: list[_Deferred]) -> list[tuple[int, str, int, str]]:
        """(module_id, version_key, format, document) of each deferred version
        whose document could be made; the others are logged, as `document`."""
        made: list[tuple[int, str, int, str]] = []
        for item in deferred:
            module, version = item.module, item.version
            try:
                text = self.build_json(item.mirror, item.repo, module, version)
            except (GitError, GitregError, OSError, KeyError, ValueError) as exc:
                log.warning("no documentation for %s %s: %s", module.address, version.version, exc)
                continue
            made.append((module.id, version.version_key, DOCS_FORMAT, text))
        return made

    def update_search(self, module: ModuleRecord) -> None:
        """For the publisher, after a sync: make and store the documents it
        deferred, then `refresh_search`; a failure is logged, never raised."""
        deferred, self._deferred.items = self._pending(), []
        pending = self._made(deferred)
        try:
            if not (pending and self._store(module, pending)):
                self.refresh_search(module)
        except (GitregError, OSError, KeyError, ValueError) as exc:
            log.warning("search row of %s not updated: %s", module.address, exc)

    def _store(self, module: ModuleRecord, pending: list[tuple[int, str, int, str]]) -> bool:
        """Store deferred documents and, when the latest version's is one of
        them, the search row made from it in the same transaction: one commit
        (one fsync) per sync, not two. False when the row was not replaced (an
        older version, or a document stored before): `refresh_search` then."""
        key = self._latest_key(module)
        # By module too: documents deferred by a sync that failed before its
        # update_search are stored by the thread's next one, for another module.
        text = next((t for m, k, _, t in pending if m == module.id and k == key), None)
        entry = None if text is None else _search_entry(module, json.loads(text), key or "")
        stored, replaced = self._catalog.put_docs_and_search(pending, entry, key or "")
        if stored:
            self._on_change()
        return replaced

    def refresh_search(self, module: ModuleRecord) -> bool:
        """Rebuild a module's search row from its latest stored document (after
        `gitreg migrate-storage`, which does not copy search rows); False when
        it has no documented listed version."""
        key = self._latest_key(module)
        stored = self._catalog.docs(module.id, key) if key is not None else None
        if stored is None or key is None:
            return False
        self._put_search(module, json.loads(stored), key)
        return True

    def refresh_stale_search(self, modules: Iterable[ModuleRecord]) -> int:
        """For `gitreg reindex`: rebuild the search rows of `modules` that are
        missing (`gitreg migrate-storage` does not copy them) or not made from
        the module's latest version (rows stored before they recorded it);
        returns how many were rebuilt."""
        stored = self._catalog.search_version_keys()
        stale = [m for m in modules if stored.get(m.id) != self._latest_key(m)]
        return sum(self.refresh_search(m) for m in stale)

    def _is_latest(self, module: ModuleRecord, version_key: str) -> bool:
        return self._latest_key(module) == version_key

    def _latest_key(self, module: ModuleRecord) -> str | None:
        """The key of the module's latest version (`latest_listed`), whose
        words the search row holds; None when it has none."""
        chosen = latest_listed(self._index.versions(module.id))
        return version_key(chosen) if chosen is not None else None


def _search_entry(module: ModuleRecord, doc: dict[str, Any], key: str) -> SearchEntry:
    return SearchEntry(
        module.id,
        module.namespace,
        module.name,
        module.system,
        description(doc),
        search_text(doc),
        key,
    )

"""What the catalog needs from the index: module documentation and search,
provider documentation, download counts. The same rules as
protocols.py: code outside gitreg/storage/ types against these; each docstring
states the contract an implementation keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class CatalogIndex(Protocol):
    """Module documentation and search (SQL in store_sql.py)."""

    def put_docs(self, module_id: int, version_key: str, fmt: int, document: str) -> bool:
        """Store a version's document once; False when one of this format exists."""
        ...

    def put_docs_many(self, documents: list[tuple[int, str, int, str]]) -> int:
        """`put_docs` of many in one transaction; how many were stored."""
        ...

    def put_docs_and_search(
        self, documents: list[tuple[int, str, int, str]], search: SearchEntry | None, key: str
    ) -> tuple[int, bool]:
        """`put_docs_many` and, in the same transaction, the search row replaced
        by `search` if the document of version `key` was stored by this call;
        how many were stored, and whether the row was replaced."""
        ...

    def docs(self, module_id: int, version_key: str) -> str | None: ...

    def missing_docs(self, fmt: int, after_version_id: int, limit: int) -> list[MissingDocs]:
        """The next batch of versions without a document of format `fmt`."""
        ...

    def put_search(self, entry: SearchEntry) -> None:
        """Replace a module's search row with its latest version's words."""
        ...

    def search(
        self, query: str, limit: int, hidden: frozenset[str] = frozenset()
    ) -> list[tuple[int, str]]:
        """(module_id, namespace) best first; exact name matches first; none
        of the `hidden` namespaces (lowercase), left out before the limit."""
        ...

    def searchable_modules(self) -> set[int]:
        """Ids of modules that have a search row."""
        ...

    def search_version_keys(self) -> dict[int, str]:
        """By module id, the key of the version its search row was made from
        ("" when the row does not record it)."""
        ...


class ProviderDocsIndex(Protocol):
    """Provider documentation pages (SQL in store_sql_provider_docs.py)."""

    def put_provider_docs(
        self, version_id: int, fmt: int, listing: str, pages: list[DocPage]
    ) -> bool:
        """Listing and pages in one transaction, once; False when already stored."""
        ...

    def provider_docs(self, provider_id: int) -> dict[int, str]: ...

    def provider_doc_listing(self, version_id: int) -> str | None:
        """One version's listing JSON (what `provider_docs` holds for it), or None."""
        ...

    def provider_doc_page(self, version_id: int, doc_id: str) -> str | None: ...

    def undocumented_provider_versions(self, fmt: int) -> list[UndocumentedVersion]: ...


@dataclass(frozen=True)
class SearchEntry:
    """What search indexes for one module (its latest version's words), and
    that version's key ("" when not known)."""

    module_id: int
    namespace: str
    name: str
    system: str
    description: str
    body: str
    version_key: str = ""


@dataclass(frozen=True)
class MissingDocs:
    """A published version without a current document, for `gitreg reindex`."""

    version_id: int
    module_id: int
    version_key: str


@dataclass(frozen=True)
class DocPage:
    """One rendered page of a provider version's documentation."""

    doc_id: str
    html: str


@dataclass(frozen=True)
class UndocumentedVersion:
    """A provider version without documentation, for `gitreg reindex`."""

    version_id: int
    provider_id: int
    version: str
    source: str

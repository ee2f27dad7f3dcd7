"""All SQL of provider documentation (migration `0016-provider-docs-downloads`).

A provider version's pages are written once, with their listing, in one
transaction, and never replaced (immutable like the version's packages);
only a newer listing format replaces them, which is how `gitreg reindex`
would upgrade them after their shape changes.
"""

from __future__ import annotations

from gitreg.catalog.store import DocPage, UndocumentedVersion
from gitreg.storage.index import IndexBackedStore, utcnow


class ProviderDocsStore(IndexBackedStore):
    def put_provider_docs(
        self, version_id: int, fmt: int, listing: str, pages: list[DocPage]
    ) -> bool:
        """Store a version's listing and pages; False when a listing of this
        format is already stored."""
        with self._write() as conn:
            row = conn.execute(
                "SELECT format FROM provider_doc_sets WHERE version_id = ?", (version_id,)
            ).fetchone()
            if row is not None and int(row[0]) >= fmt:
                return False
            conn.execute("DELETE FROM provider_doc_pages WHERE version_id = ?", (version_id,))
            conn.execute("DELETE FROM provider_doc_sets WHERE version_id = ?", (version_id,))
            conn.execute(
                "INSERT INTO provider_doc_sets (version_id, format, listing, created_at)"
                " VALUES (?, ?, ?, ?)",
                (version_id, fmt, listing, utcnow()),
            )
            for page in pages:
                conn.execute(
                    "INSERT INTO provider_doc_pages (version_id, doc_id, html) VALUES (?, ?, ?)",
                    (version_id, page.doc_id, page.html),
                )
        return True

    def provider_docs(self, provider_id: int) -> dict[int, str]:
        """{version_id: listing JSON} of a provider's documented versions."""
        rows = self._rows(
            "SELECT d.version_id, d.listing FROM provider_doc_sets d"
            " JOIN provider_versions v ON v.id = d.version_id WHERE v.provider_id = ?",
            (provider_id,),
        )
        return {int(r[0]): str(r[1]) for r in rows}

    def provider_doc_listing(self, version_id: int) -> str | None:
        """The listing JSON of one documented version."""
        rows = self._rows(
            "SELECT listing FROM provider_doc_sets WHERE version_id = ?", (version_id,)
        )
        return str(rows[0][0]) if rows else None

    def provider_doc_page(self, version_id: int, doc_id: str) -> str | None:
        rows = self._rows(
            "SELECT html FROM provider_doc_pages WHERE version_id = ? AND doc_id = ?",
            (version_id, doc_id),
        )
        return str(rows[0][0]) if rows else None

    def undocumented_provider_versions(self, fmt: int) -> list[UndocumentedVersion]:
        """Provider versions without a listing of format `fmt`, by id."""
        rows = self._rows(
            "SELECT v.id, v.provider_id, v.version, v.source FROM provider_versions v"
            " LEFT JOIN provider_doc_sets d ON d.version_id = v.id AND d.format >= ?"
            " WHERE d.version_id IS NULL ORDER BY v.id",
            (fmt,),
        )
        return [UndocumentedVersion(int(r[0]), int(r[1]), str(r[2]), str(r[3])) for r in rows]

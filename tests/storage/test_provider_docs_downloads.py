"""Contract: provider documentation pages (ProviderDocsIndex) and download
counts (DownloadCountIndex), on SQLite and PostgreSQL (migration 0016)."""

from __future__ import annotations

from typing import cast

import pytest

from gitreg.catalog.store import DocPage, ProviderDocsIndex
from gitreg.catalog.store_sql_provider_docs import ProviderDocsStore
from gitreg.storage.index import Index
from gitreg.usage import store_sql as download_counts
from gitreg.usage.store import DownloadCountIndex, DownloadRow
from gitreg.usage.store_sql import DownloadCountStore
from tests.providers.test_provider_index import _key_row, _version
from tests.support.backends import Backend


def _published(implementation: Backend) -> tuple[int, int]:
    providers = implementation.providers
    provider = providers.add_provider("acme", "null")
    assert providers.publish_provider_version(_version(provider.id, _key_row(implementation)))
    version = providers.provider_version(provider.id, "1.0.0")
    assert version is not None
    return provider.id, version.id


def test_provider_docs_are_stored_once_with_their_pages(implementation: Backend) -> None:
    docs: ProviderDocsIndex = ProviderDocsStore(cast(Index, implementation.index))
    provider_id, version_id = _published(implementation)
    assert [u.version for u in docs.undocumented_provider_versions(1)] == ["1.0.0"]
    assert docs.undocumented_provider_versions(1)[0].source == "test"
    pages = [DocPage("overview-index", "<p>a</p>"), DocPage("resources-x", "<p>b</p>")]
    assert docs.put_provider_docs(version_id, 1, '{"docs": 1}', pages)
    assert not docs.put_provider_docs(version_id, 1, '{"docs": 2}', [DocPage("other", "")])
    assert docs.provider_docs(provider_id) == {version_id: '{"docs": 1}'}
    assert docs.provider_doc_listing(version_id) == '{"docs": 1}'
    assert docs.provider_doc_listing(version_id + 1) is None
    assert docs.provider_doc_page(version_id, "resources-x") == "<p>b</p>"
    assert docs.provider_doc_page(version_id, "other") is None
    assert docs.undocumented_provider_versions(1) == []
    # A newer format replaces listing and pages together (reindex after a shape change).
    assert docs.put_provider_docs(version_id, 2, '{"docs": 3}', [DocPage("other", "<p/>")])
    assert docs.provider_doc_page(version_id, "resources-x") is None
    assert docs.provider_doc_page(version_id, "other") == "<p/>"


def test_download_counts_add_up_across_flushes(implementation: Backend) -> None:
    counts: DownloadCountIndex = DownloadCountStore(cast(Index, implementation.index))
    assert counts.download_totals().as_dict() == {}
    counts.add_downloads([])
    first = [
        DownloadRow("module", 1, "1.0.0", "2026-01-01", 0, 2),
        DownloadRow("module", 1, "1.1.0", "2026-01-01", 7, 1),
        DownloadRow("provider", 1, "1.0.0", "2026-01-01", 0, 4),
    ]
    counts.add_downloads(first)
    # Another process (or the next flush) adds to the same rows, never replaces them.
    counts.add_downloads(
        [
            DownloadRow("module", 1, "1.0.0", "2026-01-01", 0, 3),
            DownloadRow("module", 1, "1.0.0", "2026-01-02", 0, 1),
        ]
    )
    totals = counts.download_totals()
    assert totals.as_dict() == {("module", 1): 7, ("provider", 1): 4}
    assert (totals.get("module", 1), totals.get("module", 2), totals.get("other", 1)) == (7, 0, 0)
    by_token = [
        (r.version, r.token_id, r.downloads) for r in counts.usage_rows("module", 1, "2026-01-01")
    ]
    assert by_token == [("1.0.0", 0, 6), ("1.1.0", 7, 1)]
    by_token = [
        (r.version, r.token_id, r.downloads) for r in counts.usage_rows("module", 1, "2026-01-02")
    ]
    assert by_token == [("1.0.0", 0, 1)]


def test_download_totals_are_read_by_pages(
    implementation: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(download_counts, "TOTALS_PAGE", 2)  # 5 modules: three pages
    counts: DownloadCountIndex = DownloadCountStore(cast(Index, implementation.index))
    counts.add_downloads(
        [DownloadRow("module", i, v, "2026-01-01", 0, i) for i in (9, 3, 5, 1, 7) for v in "ab"]
        + [DownloadRow("provider", 4, "1.0.0", "2026-01-01", 0, 1)]
    )
    totals = counts.download_totals()
    assert totals.as_dict() == {
        **{("module", i): 2 * i for i in (1, 3, 5, 7, 9)},
        ("provider", 4): 1,
    }
    assert [totals.get("module", i) for i in range(11)] == [0, 2, 0, 6, 0, 10, 0, 14, 0, 18, 0]

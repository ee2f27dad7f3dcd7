"""A sync's documents and the module's search row are written together (one commit,
one fsync, per sync, so extraction stays within its share of publish time), and
the row is still that of the newest version when a sync publishes an older one."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import cast

import pytest

from gitreg.archives.build import ObjectSource
from gitreg.catalog.extract import Origin
from gitreg.catalog.store import SearchEntry
from gitreg.catalog.store_sql import CatalogStore
from gitreg.services import Services
from gitreg.storage.index import Index
from tests.support.gitrepo import GitRepo


class RecordingCatalog(CatalogStore):
    """The real store, noting each write the documenter asks of it."""

    def __init__(self, index: Index) -> None:
        super().__init__(index)
        self.writes: list[str] = []

    def put_docs_many(self, documents: list[tuple[int, str, int, str]]) -> int:
        self.writes.append("put_docs_many")
        return super().put_docs_many(documents)

    def put_docs_and_search(
        self, documents: list[tuple[int, str, int, str]], search: SearchEntry | None, key: str
    ) -> tuple[int, bool]:
        self.writes.append("put_docs_and_search")
        return super().put_docs_and_search(documents, search, key)

    def put_search(self, entry: SearchEntry) -> None:
        self.writes.append("put_search")
        super().put_search(entry)


def _recording(svc: Services) -> RecordingCatalog:
    catalog = RecordingCatalog(cast(Index, svc.index))
    svc.docs._catalog = catalog
    return catalog


def _tag(repo: GitRepo, word: str, tag: str) -> None:
    repo.write("main.tf", f'variable "{word}_input" {{}}\n')
    repo.write("README.md", f"# VPC\n\nAbout {word}.\n")
    repo.commit(word)
    repo.tag(tag)


def _sync(svc: Services, repo: GitRepo) -> int:
    record = svc.index.add_repo(str(repo.path), "")  # get or create
    if svc.index.find_module("acme", "vpc", "aws") is None:
        svc.index.add_module(record.id, "acme", "vpc", "aws", "", "")
    svc.publisher.sync_repo(svc.index.repo(record.id))
    module = svc.index.find_module("acme", "vpc", "aws")
    assert module is not None
    return module.id


def test_one_sync_writes_its_documents_and_the_search_row_in_one_call(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("vpc")
    for word, tag in (("alpha", "v1.0.0"), ("bravo", "v1.1.0"), ("charlie", "v1.2.0")):
        _tag(repo, word, tag)
    catalog = _recording(svc)
    module_id = _sync(svc, repo)
    assert catalog.writes == ["put_docs_and_search"]
    assert all(svc.catalog_index.docs(module_id, v) for v in ("1.0.0", "1.1.0", "1.2.0"))
    assert svc.catalog_index.search("charlie", 10) == [(module_id, "acme")]
    assert svc.catalog_index.search("bravo", 10) == []


def test_a_sync_of_an_older_version_keeps_the_newest_versions_row(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("vpc")
    _tag(repo, "alpha", "v1.1.0")
    module_id = _sync(svc, repo)
    _tag(repo, "backport", "v1.0.1")
    catalog = _recording(svc)
    _sync(svc, repo)
    # The newest version's document was stored before: the row is rebuilt from it.
    assert catalog.writes == ["put_docs_and_search", "put_search"]
    assert svc.catalog_index.docs(module_id, "1.0.1") is not None
    assert svc.catalog_index.search("alpha", 10) == [(module_id, "acme")]
    assert svc.catalog_index.search("backport", 10) == []


def test_a_document_that_cannot_be_made_leaves_the_others_of_the_sync(
    svc: Services,
    make_repo: Callable[[str], GitRepo],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Documents of a sync are made together at its end: one failing is logged
    # and left to `gitreg reindex`, as when each was made at its publish.
    repo = make_repo("vpc")
    for word, tag in (("alpha", "v1.0.0"), ("bravo", "v1.1.0"), ("charlie", "v1.2.0")):
        _tag(repo, word, tag)
    make = svc.docs._documents.document

    def failing(store: ObjectSource, tree_sha: str, origin: Origin) -> str:
        if origin.version == "1.1.0":
            raise ValueError("unreadable")
        return make(store, tree_sha, origin)

    monkeypatch.setattr(svc.docs._documents, "document", failing)
    with caplog.at_level(logging.WARNING, logger="gitreg.catalog"):
        module_id = _sync(svc, repo)
    assert "no documentation for acme/vpc/aws 1.1.0: unreadable" in caplog.text
    assert svc.catalog_index.docs(module_id, "1.1.0") is None
    assert svc.catalog_index.docs(module_id, "1.0.0") and svc.catalog_index.docs(module_id, "1.2.0")
    assert svc.catalog_index.search("charlie", 10) == [(module_id, "acme")]
    assert [v.version for v in svc.index.versions(module_id)] == ["1.0.0", "1.1.0", "1.2.0"]


def test_documents_left_by_a_failed_sync_never_make_another_modules_row(
    svc: Services, make_repo: Callable[[str], GitRepo], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sync that fails after publishing leaves its deferred documents to the
    # thread's next sync; that one, of another module at the same version,
    # must build its search row from its own document.
    net, vpc = make_repo("net"), make_repo("vpc")
    _tag(net, "alpha", "v1.0.0")
    _tag(vpc, "bravo", "v1.0.0")
    net_record = svc.index.add_repo(str(net.path), "")
    net_id = svc.index.add_module(net_record.id, "acme", "net", "aws", "", "").id

    def failing(module: object) -> None:
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(svc.docs, "update_search", failing)
        with pytest.raises(OSError):
            svc.publisher.sync_repo(svc.index.repo(net_record.id))
    vpc_id = _sync(svc, vpc)
    assert svc.catalog_index.search("bravo", 10) == [(vpc_id, "acme")]
    assert svc.catalog_index.search("alpha", 10) == []
    assert svc.catalog_index.docs(net_id, "1.0.0") is not None


def _second_tag_fails(
    svc: Services, make_repo: Callable[[str], GitRepo], monkeypatch: pytest.MonkeyPatch
) -> GitRepo:
    """acme/vpc tagged v1.0.0 ("alpha") and v1.1.0 ("bravo"), whose publishing
    fails with OSError("disk full"): a sync stops at the second tag."""
    repo = make_repo("vpc")
    _tag(repo, "alpha", "v1.0.0")
    _tag(repo, "bravo", "v1.1.0")
    publish = svc.publisher._publish_one

    def failing_second(*args: object, **kwargs: object) -> str:
        if getattr(args[2], "version", "") == "1.1.0":
            raise OSError("disk full")
        return publish(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(svc.publisher, "_publish_one", failing_second)
    return repo


def test_versions_published_before_a_failing_tag_get_documents_and_a_search_row(
    svc: Services, make_repo: Callable[[str], GitRepo], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sync stops at the failing tag; what it published before stays
    # installable, so it is documented and searchable at once, not at the
    # module's next new tag.
    repo = _second_tag_fails(svc, make_repo, monkeypatch)
    with pytest.raises(OSError):
        _sync(svc, repo)
    module = svc.index.find_module("acme", "vpc", "aws")
    assert module is not None
    assert svc.catalog_index.docs(module.id, "1.0.0") is not None
    assert svc.catalog_index.search("alpha", 10) == [(module.id, "acme")]


def test_a_failing_search_row_after_a_failed_sync_leaves_the_syncs_own_error(
    svc: Services, make_repo: Callable[[str], GitRepo], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error that stopped the sync is the one its job reports, not one from
    documenting the versions published before it."""
    repo = _second_tag_fails(svc, make_repo, monkeypatch)

    def failing_search(*args: object) -> None:
        raise RuntimeError("search row")

    monkeypatch.setattr(svc.docs, "update_search", failing_search)
    with pytest.raises(OSError, match="disk full"):
        _sync(svc, repo)

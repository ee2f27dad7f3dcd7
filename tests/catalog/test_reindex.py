"""`gitreg reindex` back-fills documentation for versions published before it
existed, and resumes where an interrupted run stopped."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gitreg.catalog import tree
from gitreg.catalog.documenter import Published
from gitreg.catalog.extract import DOCS_FORMAT
from gitreg.cli import main
from gitreg.git.backend import DulwichBackend
from gitreg.modules.publisher import Publisher
from gitreg.services import Services, build_services
from gitreg.settings import load_settings
from gitreg.storage.copy import tables_in_order
from gitreg.storage.records import ModuleRecord, RepoRecord
from tests.support.gitrepo import GitRepo, simple_module


def _published_undocumented(
    data: Path, repo: GitRepo, tags: tuple[str, ...] = ("v1.0.0",)
) -> tuple[Services, RepoRecord, ModuleRecord, Publisher]:
    """acme/vpc/aws published by a publisher without documentation: how
    versions were published before reindex existed."""
    svc = build_services(load_settings({"data_dir": data}, environ={}))
    simple_module(repo)
    repo.commit()
    for tag in tags:
        repo.tag(tag)
    record = svc.index.add_repo(str(repo.path), "")
    module = svc.index.add_module(record.id, "acme", "vpc", "aws", "", "")
    old = Publisher(svc.settings, svc.index, svc.blobs, DulwichBackend())
    old.sync_repo(svc.index.repo(record.id))
    return svc, record, module, old


def test_reindex_documents_old_versions_and_resumes(
    tmp_path: Path, make_repo: Callable[[str], GitRepo], capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    tags = ("v1.0.0", "v1.1.0", "v1.2.0")
    svc, record, module, old = _published_undocumented(data, make_repo("vpc"), tags)
    assert [svc.catalog_index.docs(module.id, v) for v in ("1.0.0", "1.1.0", "1.2.0")] == [None] * 3
    # An interrupted run: it had documented the first version when it stopped.
    first = svc.catalog_index.missing_docs(1, 0, 1)[0]
    assert first.version_key == "1.0.0"
    stored = svc.index.version_by_key(module.id, "1.0.0")
    assert stored is not None
    svc.docs.document(
        old.mirror_path(record),
        record,
        module,
        Published(stored.version, "1.0.0", stored.commit_sha, stored.tree_sha),
    )
    svc.close()

    assert main(["reindex", "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert "1/2 acme/vpc/aws 1.1.0" in out and "2/2 acme/vpc/aws 1.2.0" in out
    assert "reindex: 2 documented, 0 failed" in out
    assert main(["reindex", "--data-dir", str(data)]) == 0
    assert "reindex: 0 documented, 0 failed" in capsys.readouterr().out

    svc = build_services(load_settings({"data_dir": data}, environ={}))
    try:
        for version in ("1.0.0", "1.1.0", "1.2.0"):
            assert '"greeting"' in (svc.catalog_index.docs(module.id, version) or "")
        assert svc.catalog_index.search("greeting", 10) == [(module.id, "acme")]
    finally:
        svc.close()


def test_reindex_rebuilds_search_rows_a_module_lacks(
    tmp_path: Path, make_repo: Callable[[str], GitRepo], capsys: pytest.CaptureFixture[str]
) -> None:
    """As after `gitreg migrate-storage`, which copies documents but not search rows."""
    data = tmp_path / "data"
    svc, record, module, old = _published_undocumented(data, make_repo("vpc"))
    stored = svc.index.version_by_key(module.id, "1.0.0")
    assert stored is not None
    published = Published(stored.version, "1.0.0", stored.commit_sha, stored.tree_sha)
    document = svc.docs.build(old.mirror_path(record), record, module, published)
    svc.catalog_index.put_docs(module.id, "1.0.0", DOCS_FORMAT, json.dumps(document))
    assert svc.catalog_index.searchable_modules() == set()
    assert "module_search" not in tables_in_order() and "module_docs" in tables_in_order()
    svc.close()
    assert main(["reindex", "--data-dir", str(data)]) == 0
    assert "reindex: 0 documented, 0 failed" in capsys.readouterr().out
    svc = build_services(load_settings({"data_dir": data}, environ={}))
    try:
        assert svc.catalog_index.search("greeting", 10) == [(module.id, "acme")]
    finally:
        svc.close()


def test_a_version_whose_mirror_is_gone_fails_and_is_retried_later(
    tmp_path: Path, make_repo: Callable[[str], GitRepo], capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    svc, record, _, old = _published_undocumented(data, make_repo("vpc"))
    mirror = old.mirror_path(record)
    mirror.rename(mirror.with_suffix(".away"))
    svc.close()
    # As in a new `gitreg reindex` process: the trees and blobs read at publish
    # are not in this process's caches by sha (which would answer for them).
    tree._TREES.clear()
    tree._TEXTS.clear()
    assert main(["reindex", "--data-dir", str(data)]) == 1
    assert "reindex: 0 documented, 1 failed (run again to retry them)" in capsys.readouterr().out
    shutil.rmtree(mirror, ignore_errors=True)  # whatever the failed attempt left there
    mirror.with_suffix(".away").rename(mirror)
    assert main(["reindex", "--data-dir", str(data)]) == 0
    assert "reindex: 1 documented, 0 failed" in capsys.readouterr().out


def test_reindex_renders_again_the_documents_of_an_older_format(
    tmp_path: Path, make_repo: Callable[[str], GitRepo], capsys: pytest.CaptureFixture[str]
) -> None:
    """Versions rendered before READMEs kept their HTML (format 1: raw HTML
    escaped, no heading ids) get their document again from `gitreg reindex`."""
    data = tmp_path / "data"
    svc, _, module, _ = _published_undocumented(data, make_repo("vpc"))
    old = {"format": 1, "root": {"readme_html": "<h1>test module</h1>"}}
    assert svc.catalog_index.put_docs(module.id, "1.0.0", 1, json.dumps(old))
    assert [m.version_key for m in svc.catalog_index.missing_docs(DOCS_FORMAT, 0, 10)] == ["1.0.0"]
    svc.close()

    assert main(["reindex", "--data-dir", str(data)]) == 0
    assert "reindex: 1 documented, 0 failed" in capsys.readouterr().out
    svc = build_services(load_settings({"data_dir": data}, environ={}))
    try:
        doc = json.loads(svc.catalog_index.docs(module.id, "1.0.0") or "{}")
        assert doc["format"] == DOCS_FORMAT
        assert doc["root"]["readme_html"] == '<h1 id="readme-test-module">test module</h1>\n'
    finally:
        svc.close()

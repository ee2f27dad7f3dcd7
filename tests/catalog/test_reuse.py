"""Documents made once per distinct content (gitreg/catalog/reuse.py): a later
version with the same documentation files gets the same document with its own
commit, and exactly what a fresh extraction would make of it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest

from gitreg.catalog import extract as extract_module
from gitreg.catalog import reuse
from gitreg.catalog.documenter import Published
from gitreg.catalog.extract import Origin, extract
from gitreg.catalog.tree import read_doc_files
from gitreg.git.backend import DulwichBackend
from gitreg.services import Services
from gitreg.storage.records import ModuleRecord, RepoRecord
from tests.support.gitrepo import GitRepo

README = "# VPC\n\nSee [the example](examples/basic/main.tf) and ![d](docs/d.png).\n"
CHANGELOG = "# Changelog\n\n## 1.1.0\n- [second](docs/b.md)\n\n## 1.0.0\n- [first](docs/a.md)\n"
# A forge remote has a web address, so relative links are resolved against the commit.
FORGE = "git@git.example.com:platform/terraform-aws-vpc.git"


def _two_commits_same_files(repo: GitRepo, changelog: str = CHANGELOG) -> None:
    """1.0.0 and 1.1.0: different commits (and root trees), the same .tf,
    README and CHANGELOG; only a file documentation does not read differs."""
    repo.write("main.tf", 'variable "name" {\n  description = "The name"\n}\n')
    repo.write("README.md", README)
    repo.write("CHANGELOG.md", changelog)
    repo.write("modules/subnets/main.tf", 'output "ids" { value = [] }\n')
    repo.write("modules/subnets/README.md", "[up](../../README.md)\n")
    repo.write("version.txt", "1")
    repo.commit("one")
    repo.tag("v1.0.0")
    repo.write("version.txt", "2")
    repo.commit("two")
    repo.tag("v1.1.0")


def _published(svc: Services, repo: GitRepo) -> tuple[RepoRecord, ModuleRecord]:
    record = svc.index.add_repo(str(repo.path), "")
    module = svc.index.add_module(record.id, "acme", "vpc", "aws", "", "")
    svc.publisher.sync_repo(svc.index.repo(record.id))
    return svc.index.repo(record.id), module


def _fresh(svc: Services, record: RepoRecord, version: Published) -> dict[str, Any]:
    """What extraction made of a version before documents were reused."""
    with DulwichBackend().objects(svc.publisher.mirror_path(record)) as store:
        files, notes = read_doc_files(store, version.tree_sha)
    page = f"/modules/acme/vpc/aws/{version.version}"
    return extract(files, Origin(record.url, version.commit_sha, "", version.version, page), notes)


def _version(svc: Services, module: ModuleRecord, key: str) -> Published:
    stored = svc.index.version_by_key(module.id, key)
    assert stored is not None
    return Published(stored.version, key, stored.commit_sha, stored.tree_sha)


def test_same_files_at_two_commits_get_their_own_commit_and_links(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("vpc")
    _two_commits_same_files(repo)
    record, module = _published(svc, repo)
    # As a forge remote: the same mirror, but links resolve to the web address.
    forge = dataclasses.replace(record, url=FORGE)
    mirror = svc.publisher.mirror_path(record)
    first, second = _version(svc, module, "1.0.0"), _version(svc, module, "1.1.0")
    assert first.commit_sha != second.commit_sha
    docs = [svc.docs.build(mirror, forge, module, v) for v in (first, second, first)]
    for doc, version in zip(docs, (first, second, first), strict=True):
        assert doc == _fresh(svc, forge, version)
        assert doc["commit"] == version.commit_sha
        page = f"/modules/acme/vpc/aws/{version.version}"
        readme = doc["root"]["readme_html"]
        assert f'href="{page}/files/examples/basic/main.tf"' in readme
        assert f'src="{page}/raw/docs/d.png"' in readme
        assert f'href="{page}/files/README.md"' in doc["submodules"][0]["readme_html"]
    # The CHANGELOG section is the version's own, its link at its own version.
    assert "second" in docs[1]["changelog_html"] and "first" not in docs[1]["changelog_html"]
    assert "/aws/1.0.0/files/docs/a.md" in docs[0]["changelog_html"]
    assert "/aws/1.1.0/files/docs/b.md" in docs[1]["changelog_html"]


def test_published_versions_store_their_own_commit_and_extract_once(
    svc: Services, make_repo: Callable[[str], GitRepo], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def counted(files: dict[str, bytes], origin: Origin, notes: list[str]) -> dict[str, Any]:
        calls.append(origin.version)
        return extract(files, origin, notes)

    monkeypatch.setattr(reuse, "extract", counted)
    repo = make_repo("vpc")
    _two_commits_same_files(repo, "# Changelog\n")  # no section for either version
    record, module = _published(svc, repo)
    for key in ("1.0.0", "1.1.0"):
        stored = svc.catalog_index.docs(module.id, key)
        assert stored is not None
        version = _version(svc, module, key)
        assert json.loads(stored) == _fresh(svc, record, version)
        assert json.loads(stored)["commit"] == version.commit_sha
    assert calls == ["1.0.0"]  # 1.1.0 reused the first document
    repo.write("main.tf", 'variable "other" {}\n')
    repo.commit("three")
    repo.tag("v1.2.0")
    svc.publisher.sync_repo(record)
    stored = svc.catalog_index.docs(module.id, "1.2.0")
    assert stored is not None and json.loads(stored)["root"]["inputs"][0]["name"] == "other"
    assert calls == ["1.0.0", "1.2.0"]  # new content: extracted again


def test_a_new_document_reads_the_listed_files_without_walking_the_tree_again(
    svc: Services, make_repo: Callable[[str], GitRepo], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo("vpc")
    _two_commits_same_files(repo)
    record, module = _published(svc, repo)

    def walked(store: object, tree_sha: str) -> tuple[dict[str, bytes], list[str]]:
        raise AssertionError("the tree was walked again after doc_listing")

    monkeypatch.setattr(reuse, "read_doc_files", walked)
    version = _version(svc, module, "1.1.0")
    fresh = reuse.Documents()  # an empty cache: the document is made anew
    with DulwichBackend().objects(svc.publisher.mirror_path(record)) as store:
        page = f"/modules/acme/vpc/aws/{version.version}"
        origin = Origin(record.url, version.commit_sha, "", version.version, page)
        made = json.loads(fresh.document(store, version.tree_sha, origin))
    assert made == _fresh(svc, record, version)


def test_a_changelog_section_per_version_is_part_of_what_is_reused() -> None:
    files = {"CHANGELOG.md": CHANGELOG.encode(), "changelog.tf": b'variable "x" {}\n'}
    assert extract_module.changelog_text(files, "1.1.0") == "- [second](docs/b.md)"
    assert extract_module.changelog_text(files, "2.0.0") == ""
    assert extract_module.is_changelog("changelog.tf")
    assert not extract_module.is_changelog("modules/a/CHANGELOG.md")


def test_the_document_cache_stays_within_its_bytes() -> None:
    documents = reuse.Documents(max_bytes=800)
    keys = [("r", "", ((f"{n}.tf", b"0" * 20),), "") for n in range(9)]
    for key in keys[:8]:
        documents._texts.put(key, "x" * 100)
    assert documents._texts.size == 800 and keys[0] in documents._texts
    documents._texts.put(keys[8], "x" * 100)
    assert documents._texts.size == 800 and keys[0] not in documents._texts
    documents._texts.put(("r", "", (), "big"), "x" * 101)  # more than an eighth: not kept
    assert ("r", "", (), "big") not in documents._texts

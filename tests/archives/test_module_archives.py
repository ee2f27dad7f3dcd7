"""Contract: archive builders, per-directory archives and module globs."""

from __future__ import annotations

import dataclasses

import pytest

from gitreg.archives.format import CLASSIC
from gitreg.errors import Conflict
from gitreg.repositories.store import ModuleGlobLink, RepoRow
from gitreg.storage.records import NewVersion
from tests.support.backends import Backend

URL = "https://git.example/acme/infra.git"
GLOB = ModuleGlobLink("modules/*", "acme", "aws", "{name}/v{version}", "subdir")


def _version(module_id: int, **changes: object) -> NewVersion:
    new = NewVersion(
        module_id=module_id,
        version="1.0.0",
        version_key="1.0.0",
        tag="vpc/v1.0.0",
        tag_sha="1" * 40,
        commit_sha="2" * 40,
        tree_sha="3" * 40,
        archive_sha256="a" * 64,
        archive_size=123,
        archive_mtime=1700000000,
    )
    return dataclasses.replace(new, **changes)  # type: ignore[arg-type]


def test_an_archive_keeps_the_builder_that_made_it(implementation: Backend) -> None:
    index = implementation.index
    module = index.add_module(index.add_repo(URL, "acme/infra").id, "acme", "vpc", "aws", "", "")
    index.publish_version(_version(module.id, archive_builder="tar-pax+isal-2.32.1-1"))
    assert index.archive_builder("a" * 64) == "tar-pax+isal-2.32.1-1"
    assert index.archive_builder("f" * 64) is None


def test_the_builder_of_archives_before_0017_is_the_classic_one(implementation: Backend) -> None:
    index = implementation.index
    module = index.add_module(index.add_repo(URL, "acme/infra").id, "acme", "vpc", "aws", "", "")
    index.publish_version(_version(module.id))
    assert index.archive_builder("a" * 64) == CLASSIC


def test_a_directory_archive_is_found_by_its_subtree_whatever_the_tag(
    implementation: Backend,
) -> None:
    index = implementation.index
    repo_id = index.add_repo(URL, "acme/infra").id
    module = index.add_module(repo_id, "acme", "vpc", "aws", "modules/vpc", "vpc/", "subdir")
    assert module.archive_scope == "subdir"
    subtree = {"archive_subtree": "4" * 40, "archive_subdir": "modules/vpc"}
    index.publish_version(_version(module.id, archive_builder="b1", **subtree))
    assert index.archive_for_subtree("4" * 40, "modules/vpc") == ("a" * 64, 123)
    assert index.archive_for_subtree("4" * 40, "modules/dns") is None
    # Kept apart from whole-tree archives: the root tree has no archive of its own.
    assert index.archive_for_tree("3" * 40, 1700000000) is None
    assert index.archive_builder("a" * 64) == "b1"


def test_a_module_glob_is_registered_once_and_removed_with_its_repository(
    implementation: Backend,
) -> None:
    registrations, index = implementation.registrations, implementation.index
    repo_id = registrations.register(RepoRow(URL, "acme/infra", ""), GLOB)
    assert registrations.register(RepoRow(URL, "acme/infra", ""), GLOB) == repo_id
    (glob,) = index.module_globs(repo_id)
    assert (glob.pattern, glob.namespace, glob.system) == ("modules/*", "acme", "aws")
    assert (glob.tag_pattern, glob.archive_scope) == ("{name}/v{version}", "subdir")
    with pytest.raises(Conflict):
        registrations.register(
            RepoRow(URL, "acme/infra", ""), dataclasses.replace(GLOB, tag_pattern="")
        )
    assert registrations.remove(repo_id, keep_versions=False) is True
    assert index.repos() == []
    assert index.module_globs(repo_id) == []

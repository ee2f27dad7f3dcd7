"""Contract: repositories, modules, versions and registration (ModuleIndex, RegistrationIndex)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitreg.errors import ConfigError, Conflict, NotFound
from gitreg.repositories.store import ModuleLink, RepoRow
from tests.support.backends import Backend, new_version

URL = "https://git.example/acme/terraform-aws-vpc.git"


def test_repository_round_trip_and_add_is_idempotent(implementation: Backend) -> None:
    index = implementation.index
    repo = index.add_repo(URL, "acme/terraform-aws-vpc")
    assert index.add_repo(URL, "acme/terraform-aws-vpc").id == repo.id
    assert index.repo(repo.id) == repo
    assert index.repo_by_url(URL) == repo
    assert [r.id for r in index.repos_by_forge_name("ACME/terraform-aws-vpc")] == [repo.id]


def test_missing_repository_raises_not_found(implementation: Backend) -> None:
    with pytest.raises(NotFound):
        implementation.index.repo(404)
    with pytest.raises(NotFound):
        implementation.index.repo_by_url(URL)


def test_module_address_is_unique_regardless_of_case(implementation: Backend) -> None:
    index = implementation.index
    repo = index.add_repo(URL, "acme/vpc")
    module = index.add_module(repo.id, "acme", "vpc", "aws", "", "")
    assert index.add_module(repo.id, "acme", "vpc", "aws", "", "").id == module.id
    assert index.find_module("ACME", "Vpc", "AWS") == module
    other = index.add_repo(URL + "2", "acme/other")
    with pytest.raises(Conflict):
        index.add_module(other.id, "Acme", "vpc", "aws", "", "")


def test_publish_round_trip_and_republish_changes_nothing(implementation: Backend) -> None:
    index = implementation.index
    module = index.add_module(index.add_repo(URL, "acme/vpc").id, "acme", "vpc", "aws", "", "")
    assert index.publish_version(new_version(module.id)) is True
    assert index.publish_version(new_version(module.id, sha="b" * 64)) is False
    (stored,) = index.versions(module.id)
    assert stored == index.version_by_key(module.id, "1.0.0")
    assert stored.archive_sha256 == "a" * 64
    assert index.archive_for_tree("3" * 40, 1700000000) == ("a" * 64, 123)
    assert index.version_by_key(module.id, "9.9.9") is None


def test_deprecation_round_trip_keeps_the_version_listed(implementation: Backend) -> None:
    index = implementation.index
    module = index.add_module(index.add_repo(URL, "acme/vpc").id, "acme", "vpc", "aws", "", "")
    index.publish_version(new_version(module.id))
    fresh = index.version_by_key(module.id, "1.0.0")
    assert fresh is not None and not fresh.deprecated and fresh.deprecation_link == ""
    reason = 'Use 2.x: <b>1.x</b> loses state & "quotes" \u2014 see the guide'
    index.set_deprecation(module.id, "1.0.0", reason, "https://example.com/upgrade?a=1&b=2")
    (stored,) = index.versions(module.id)
    assert stored.deprecated and not stored.yanked
    assert (stored.deprecation_reason, stored.deprecation_link) == (
        reason,
        "https://example.com/upgrade?a=1&b=2",
    )
    index.set_deprecation(module.id, "1.0.0", "no link this time")
    again = index.version_by_key(module.id, "1.0.0")
    assert again is not None and again.deprecation_link == ""
    index.set_deprecation(module.id, "1.0.0", None, "https://ignored.example")
    lifted = index.version_by_key(module.id, "1.0.0")
    assert lifted is not None and lifted.deprecation_reason is None
    assert lifted.deprecation_link == "" and lifted == fresh
    with pytest.raises(NotFound):
        index.set_deprecation(module.id, "9.9.9", "gone")


def test_a_conflict_is_recorded_once(implementation: Backend) -> None:
    index = implementation.index
    module = index.add_module(index.add_repo(URL, "acme/vpc").id, "acme", "vpc", "aws", "", "")
    args = (module.id, "1.0.0", "v1.0.0", "a" * 40, "b" * 40, "tag moved")
    assert index.record_conflict(*args) is True
    assert index.record_conflict(*args) is False
    assert len(index.conflicts(module.id)) == 1


def test_registration_is_idempotent_and_a_refused_link_leaves_nothing(
    implementation: Backend,
) -> None:
    registrations, index = implementation.registrations, implementation.index
    link = ModuleLink("acme", "vpc", "aws", "", "")
    repo_id = registrations.register(RepoRow(URL, "acme/vpc", ""), link)
    assert registrations.register(RepoRow(URL, "acme/vpc", ""), link) == repo_id
    with pytest.raises(Conflict):
        registrations.register(RepoRow(URL + "2", "acme/other", ""), link)
    assert [r.url for r in index.repos()] == [URL]


def test_removing_an_unpublished_repository_drops_it(implementation: Backend) -> None:
    registrations, index = implementation.registrations, implementation.index
    repo_id = registrations.register(
        RepoRow(URL, "acme/vpc", ""), ModuleLink("acme", "vpc", "aws", "", "")
    )
    assert registrations.remove(repo_id, keep_versions=False) is True
    assert index.repos() == []
    assert index.find_module("acme", "vpc", "aws") is None


def test_backup_is_a_whole_copy(implementation: Backend, tmp_path: Path) -> None:
    implementation.index.add_repo(URL, "acme/vpc")
    target = tmp_path / "copy" / "index.sqlite3"
    target.parent.mkdir()
    if implementation.dialect == "postgresql":
        # A shared database is backed up with its own tools, said in one line.
        with pytest.raises(ConfigError, match="pg_dump"):
            implementation.index.backup(target)
        return
    implementation.index.backup(target)
    assert target.is_file()
    assert not target.with_name("index.sqlite3.partial").exists()

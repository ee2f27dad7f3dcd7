"""The semver guard's SQL on SQLite and on PostgreSQL: checks, allowances,
policies, and what goes when a repository or module goes."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitreg.semver_guard.store import Check
from gitreg.services import Services, build_services
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo, released_module


@pytest.fixture(params=["sqlite", "postgresql"])
def svc(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Services]:
    settings: dict[str, object] = {"data_dir": tmp_path / "data"}
    if request.param == "postgresql":
        database = request.getfixturevalue("postgres_database")
        key = tmp_path / "secret.key"
        key.write_text(os.urandom(32).hex())
        key.chmod(0o600)
        settings |= {"database_url": database.url, "secret_key_file": key}
    services = build_services(load_settings(settings, environ={}))
    yield services
    services.close()


def _check(module_id: int, commit: str = "a" * 40, status: str = "refused") -> Check:
    return Check(module_id, "1.3.0", "1.3.0", "v1.3.0", commit, "1.2.0", status, "", 1, "[]")  # type: ignore[arg-type]


def _module(svc: Services, make_repo: Callable[[str], GitRepo]) -> tuple[int, int]:
    repo = released_module(make_repo("mod"))
    record = svc.index.add_repo(str(repo.path), "")
    svc.index.add_module(record.id, "acme", "mod", "aws", "", "")
    module = svc.index.find_module("acme", "mod", "aws")
    assert module is not None
    return record.id, module.id


def test_checks_and_allowances(svc: Services, make_repo: Callable[[str], GitRepo]) -> None:
    store = svc.semver._store
    _, module_id = _module(svc, make_repo)
    assert store.check(module_id, "1.3.0") is None
    assert not store.allow(module_id, "1.3.0", "ops")
    store.put_check(_check(module_id))
    assert [c.status for c in store.checks(module_id)] == ["refused"]
    assert store.allow(module_id, "1.3.0", "ops")
    found = store.check(module_id, "1.3.0")
    assert found is not None and found.allowed_by == "ops" and found.allowed_at
    # Checked again at the same commit: the allowance stays; published, it is "allowed".
    store.put_check(_check(module_id))
    store.put_check(_check(module_id, status="allowed"))
    found = store.check(module_id, "1.3.0")
    assert found is not None and (found.status, found.allowed_by) == ("allowed", "ops")
    assert store.checked_keys() == {(module_id, "1.3.0")}
    assert not store.allow(module_id, "1.3.0", "ops")  # not refused any more


def test_an_allowance_is_for_one_commit(svc: Services, make_repo: Callable[[str], GitRepo]) -> None:
    store = svc.semver._store
    _, module_id = _module(svc, make_repo)
    store.put_check(_check(module_id))
    assert store.allow(module_id, "1.3.0", "ops")
    store.put_check(_check(module_id, commit="b" * 40))  # the tag moved
    found = store.check(module_id, "1.3.0")
    assert found is not None and (found.allowed_by, found.allowed_at) == ("", None)


def test_policies_and_removal(svc: Services, make_repo: Callable[[str], GitRepo]) -> None:
    store = svc.semver._store
    repo_id, module_id = _module(svc, make_repo)
    assert store.policy(repo_id) is None and svc.semver.policy(svc.index.repo(repo_id)) == "warn"
    store.set_policy(repo_id, "enforce")
    store.set_policy(repo_id, "off")
    assert store.policy(repo_id) == "off"
    store.set_policy(repo_id, None)
    assert store.policy(repo_id) is None
    store.set_policy(repo_id, "enforce")
    store.put_check(_check(module_id))
    # No version was published: the repository, its module, policy and checks go.
    svc.repositories.remove(svc.index.repo(repo_id).url, keep_versions=False)
    assert store.policy(repo_id) is None and store.checks(module_id) == []


def test_enforce_and_allow_on_postgresql(
    tmp_path: Path, make_repo: Callable[[str], GitRepo], postgres_database: object
) -> None:
    from tests.semver_guard.test_publish import V1, WITHOUT_SIZE, release
    from tests.support.server import cli

    key = tmp_path / "secret.key"
    key.write_text(os.urandom(32).hex())
    key.chmod(0o600)
    env = {"GITREG_DATABASE_URL": postgres_database.url, "GITREG_SECRET_KEY_FILE": str(key)}  # type: ignore[attr-defined]
    data = tmp_path / "data"
    repo = make_repo("mod")
    release(repo, V1, "v1.2.0")
    add = ["repo", "add", str(repo.path), "--module", "acme/mod/aws", "--semver-check", "enforce"]
    cli(data, *add, env=env)
    release(repo, WITHOUT_SIZE, "v1.3.0")
    assert "conflict  acme/mod/aws 1.3.0" in cli(data, "sync", env=env).stdout
    out = cli(data, "modules", "allow-breaking", "acme/mod/aws", "1.3.0", "--by", "ops", env=env)
    assert "published acme/mod/aws 1.3.0" in out.stdout
    listed = cli(data, "modules", env=env).stdout
    assert "1.3.0 (latest, breaking change in a minor release (allowed by ops))" in listed
    assert "conflict" not in listed


def test_a_published_version_forgets_only_its_refusals(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    _, module_id = _module(svc, make_repo)
    index = svc.index
    index.record_conflict(module_id, "1.3.0", "v1.3.0", "", "a" * 40, "refused")
    index.record_conflict(module_id, "1.3.0", "v1.3.0-b", "c" * 40, "b" * 40, "moved tag")
    index.record_conflict(module_id, "1.4.0", "v1.4.0", "", "d" * 40, "refused")
    svc.semver._store.forget_refusals(module_id, "1.3.0")
    left = {(c.version, c.published_commit) for c in index.conflicts(module_id)}
    assert left == {("1.3.0", "c" * 40), ("1.4.0", "")}

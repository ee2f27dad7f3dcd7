"""The policy at publish, from a real git repository through `gitreg` commands
run in process: warn labels, enforce refuses (as a conflict), a new major
publishes, `allow-breaking` publishes one refused version, off compares nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from gitreg.attestations.store_sql import AttestationStore
from gitreg.services import build_services
from gitreg.settings import load_settings
from gitreg.storage.index import Index
from tests.support.gitrepo import GitRepo
from tests.support.server import cli

V1 = """
variable "name" {
  type = string
}
variable "size" {
  type    = number
  default = 1
}
output "id" {
  value = var.name
}
"""
WITHOUT_SIZE = """
variable "name" {
  type = string
}
output "id" {
  value = var.name
}
"""
WITH_EXTRA = V1 + 'variable "extra" {\n  type = bool\n  default = false\n}\n'


def release(repo: GitRepo, text: str, tag: str) -> str:
    repo.write("main.tf", text)
    commit = repo.commit(tag)
    repo.tag(tag)
    return commit


@pytest.fixture
def repo(make_repo: Callable[[str], GitRepo]) -> GitRepo:
    found = make_repo("mod")
    release(found, V1, "v1.2.0")
    return found


def modules_json(data_dir: Path) -> dict[str, object]:
    rows = json.loads(cli(data_dir, "modules", "--json").stdout)
    assert len(rows) == 1
    found: dict[str, object] = rows[0]
    return found


def versions(data_dir: Path) -> list[str]:
    rows = modules_json(data_dir)["versions"]
    assert isinstance(rows, list)
    return [v["version"] for v in rows]


def add(data_dir: Path, repo: GitRepo, *options: str) -> str:
    return cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/mod/aws", *options).stdout


def test_warn_publishes_and_labels(data_dir: Path, repo: GitRepo) -> None:
    add(data_dir, repo)
    release(repo, WITHOUT_SIZE, "v1.3.0")
    out = cli(data_dir, "sync").stdout
    assert "published acme/mod/aws 1.3.0" in out
    assert "1 with breaking changes" in out
    assert versions(data_dir) == ["1.2.0", "1.3.0"]
    listed = cli(data_dir, "modules").stdout
    assert "1.3.0 (latest, breaking change in a minor release)" in listed
    svc = build_services(load_settings({"data_dir": data_dir}, environ={}))
    try:
        found = svc.semver.changes(("acme", "mod", "aws"), "1.3.0", None).as_json()
    finally:
        svc.close()
    assert found["from"] == "1.2.0" and found["status"] == "breaking"
    assert found["label"] == "breaking change in a minor release"
    assert [c["detail"] for c in found["changes"]] == ['variable "size" removed']


def test_enforce_refuses_then_the_next_major_publishes(data_dir: Path, repo: GitRepo) -> None:
    out = add(data_dir, repo, "--semver-check", "enforce")
    assert "semver check for" in out and "enforce" in out
    release(repo, WITHOUT_SIZE, "v1.3.0")
    out = cli(data_dir, "sync").stdout
    assert "conflict  acme/mod/aws 1.3.0: tag v1.3.0 is a breaking change in a minor release" in out
    assert 'variable "size" removed' in out and "allow-breaking acme/mod/aws 1.3.0" in out
    assert versions(data_dir) == ["1.2.0"]
    row = modules_json(data_dir)
    assert len(row["conflicts"]) == 1  # type: ignore[arg-type]
    # Synced again: still refused, still reported, recorded once.
    assert "conflict  acme/mod/aws 1.3.0" in cli(data_dir, "sync").stdout
    assert len(modules_json(data_dir)["conflicts"]) == 1  # type: ignore[arg-type]
    release(repo, WITHOUT_SIZE, "v2.0.0")
    out = cli(data_dir, "sync").stdout
    assert "published acme/mod/aws 2.0.0" in out and "with breaking changes" not in out
    assert versions(data_dir) == ["1.2.0", "2.0.0"]


def test_allow_breaking_publishes_the_refused_commit(data_dir: Path, repo: GitRepo) -> None:
    add(data_dir, repo, "--semver-check", "enforce")
    release(repo, WITHOUT_SIZE, "v1.3.0")
    cli(data_dir, "sync")
    out = cli(data_dir, "modules", "allow-breaking", "acme/mod/aws", "1.3.0", "--by", "ops").stdout
    assert "published acme/mod/aws 1.3.0" in out
    assert "(allowed by ops)" in out
    assert versions(data_dir) == ["1.2.0", "1.3.0"]
    row = modules_json(data_dir)
    assert row["conflicts"] == []
    shown = [v for v in row["versions"] if v["version"] == "1.3.0"]  # type: ignore[attr-defined]
    assert shown[0]["semver"] == "breaking change in a minor release (allowed by ops)"
    again = cli(data_dir, "modules", "allow-breaking", "acme/mod/aws", "1.3.0", check=False)
    assert again.returncode != 0 and "not a refused version" in again.stderr


def test_allow_breaking_is_in_the_audit_log_and_the_transparency_log(
    data_dir: Path, repo: GitRepo
) -> None:
    add(data_dir, repo, "--semver-check", "enforce")
    release(repo, WITHOUT_SIZE, "v1.3.0")
    cli(data_dir, "sync")
    cli(data_dir, "modules", "allow-breaking", "acme/mod/aws", "1.3.0", "--by", "ops")
    rows = json.loads(cli(data_dir, "audit", "--json", "--action", "module.allow_breaking").stdout)
    assert [(r["object"], r["detail"], r["result"]) for r in rows] == [
        ("acme/mod/aws 1.3.0", "by ops", "ok")
    ]
    svc = build_services(load_settings({"data_dir": data_dir}, environ={}))
    try:
        module = svc.index.find_module("acme", "mod", "aws")
        assert module is not None
        entries = {}
        for version in ("1.2.0", "1.3.0"):
            provenance = svc.attestations.provenance(module.id, version)
            assert provenance is not None
            [entry] = AttestationStore(cast(Index, svc.index)).entries(provenance["log_index"], 1)
            entries[version] = json.loads(entry)
    finally:
        svc.close()
    assert entries["1.3.0"]["event"] == "publish" and entries["1.3.0"]["allowedBreaking"] is True
    assert "allowedBreaking" not in entries["1.2.0"]
    assert "ops" not in json.dumps(entries)  # the public log names nobody


def test_allow_breaking_does_not_carry_to_another_commit(data_dir: Path, repo: GitRepo) -> None:
    add(data_dir, repo, "--semver-check", "enforce")
    release(repo, WITHOUT_SIZE, "v1.3.0")
    cli(data_dir, "sync")
    svc = build_services(load_settings({"data_dir": data_dir}, environ={}))
    try:
        module = svc.index.find_module("acme", "mod", "aws")
        assert module is not None
        # The tag moves before the sync that would publish: the allowance was for
        # the commit that was refused, which the tag no longer names.
        assert svc.semver.checks(module.id)["1.3.0"].status == "refused"
    finally:
        svc.close()
    repo.write("main.tf", WITHOUT_SIZE + "# moved\n")
    repo.commit("other")
    repo.tag("v1.3.0", force=True)
    cli(data_dir, "sync")
    assert versions(data_dir) == ["1.2.0"]


def test_a_fixed_tag_publishes_and_clears_its_conflict(data_dir: Path, repo: GitRepo) -> None:
    add(data_dir, repo, "--semver-check", "enforce")
    release(repo, WITHOUT_SIZE, "v1.3.0")
    cli(data_dir, "sync")
    repo.write("main.tf", WITH_EXTRA)
    repo.commit("fixed")
    repo.tag("v1.3.0", force=True)
    out = cli(data_dir, "sync").stdout
    assert "published acme/mod/aws 1.3.0" in out
    assert modules_json(data_dir)["conflicts"] == []


def test_not_breaking_publishes_under_enforce(data_dir: Path, repo: GitRepo) -> None:
    add(data_dir, repo, "--semver-check", "enforce")
    release(repo, WITH_EXTRA, "v1.3.0")
    out = cli(data_dir, "sync").stdout
    assert "published acme/mod/aws 1.3.0" in out and "breaking change" not in out
    assert "(latest)" in cli(data_dir, "modules").stdout


def test_prereleases_and_0x_are_labelled_never_refused(
    data_dir: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("zero")
    release(repo, V1, "v0.1.0")
    add(data_dir, repo, "--semver-check", "enforce")
    release(repo, WITHOUT_SIZE, "v0.2.0")
    cli(data_dir, "sync")
    release(repo, V1, "v1.0.0")
    release(repo, WITHOUT_SIZE, "v1.1.0-rc.1")
    cli(data_dir, "sync")
    assert versions(data_dir) == ["0.1.0", "0.2.0", "1.0.0", "1.1.0-rc.1"]
    listed = cli(data_dir, "modules").stdout
    assert (
        "0.2.0 (breaking change in a 0.x minor release (semver allows it before 1.0.0))" in listed
    )
    assert "1.1.0-rc.1 (breaking change in a prerelease)" in listed


def test_off_compares_nothing(data_dir: Path, repo: GitRepo) -> None:
    add(data_dir, repo, "--semver-check", "off")
    release(repo, WITHOUT_SIZE, "v1.3.0")
    out = cli(data_dir, "sync").stdout
    assert "published acme/mod/aws 1.3.0" in out and "breaking change" not in out
    assert "breaking change" not in cli(data_dir, "modules").stdout


def test_repo_set_changes_the_policy(data_dir: Path, repo: GitRepo) -> None:
    add(data_dir, repo)
    assert (
        "enforce"
        in cli(data_dir, "repo", "set", "acme/mod/aws", "--semver-check", "enforce").stdout
    )
    release(repo, WITHOUT_SIZE, "v1.3.0")
    cli(data_dir, "sync")
    assert versions(data_dir) == ["1.2.0"]
    out = cli(data_dir, "repo", "set", str(repo.path), "--semver-check", "default").stdout
    assert "warn (the semver_check setting)" in out
    cli(data_dir, "sync")
    assert versions(data_dir) == ["1.2.0", "1.3.0"]


def test_the_setting_is_the_default(data_dir: Path, repo: GitRepo) -> None:
    env = {"GITREG_SEMVER_CHECK": "enforce"}
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/mod/aws", env=env)
    release(repo, WITHOUT_SIZE, "v1.3.0")
    cli(data_dir, "sync", env=env)
    assert versions(data_dir) == ["1.2.0"]
    bad = cli(data_dir, "modules", check=False, env={"GITREG_SEMVER_CHECK": "strict"})
    assert bad.returncode != 0 and "semver_check must be off, warn or enforce" in bad.stderr


def test_reindex_checks_versions_published_before_the_guard(data_dir: Path, repo: GitRepo) -> None:
    add(data_dir, repo)
    release(repo, WITHOUT_SIZE, "v1.3.0")
    cli(data_dir, "sync")
    svc = build_services(load_settings({"data_dir": data_dir}, environ={}))
    try:
        module = svc.index.find_module("acme", "mod", "aws")
        assert module is not None
        # As before the guard existed: no checks, and documents of the older format.
        with svc.index._write() as conn:  # type: ignore[attr-defined]
            conn.execute("DELETE FROM semver_checks")
            conn.execute("UPDATE module_docs SET format = 1")
    finally:
        svc.close()
    assert "breaking change" not in cli(data_dir, "modules").stdout
    out = cli(data_dir, "reindex").stdout
    assert "reindex: 2 documented, 0 failed" in out
    assert "reindex: 2 versions checked for breaking changes, 0 failed" in out
    assert "1.3.0 (latest, breaking change in a minor release)" in cli(data_dir, "modules").stdout
    assert "checked for breaking changes" not in cli(data_dir, "reindex").stdout


def test_reindex_leaves_modules_whose_policy_is_off(data_dir: Path, repo: GitRepo) -> None:
    add(data_dir, repo, "--semver-check", "off")
    release(repo, WITHOUT_SIZE, "v1.3.0")
    cli(data_dir, "sync")
    assert "checked for breaking changes" not in cli(data_dir, "reindex").stdout
    assert "breaking change" not in cli(data_dir, "modules").stdout


def test_semver_check_is_for_modules(data_dir: Path, repo: GitRepo) -> None:
    args = ["repo", "add", str(repo.path), "--provider", "acme/null", "--semver-check", "off"]
    refused = cli(data_dir, *args, check=False)
    assert refused.returncode != 0 and "--semver-check goes with --module" in refused.stderr
    unknown = cli(data_dir, "repo", "set", "acme/none/aws", "--semver-check", "off", check=False)
    assert unknown.returncode != 0 and "gitreg: error:" in unknown.stderr

"""`repo add --modules PATTERN`: every module directory of a real monorepo,
tags per module or shared, directories that appear later, per-directory archives."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from dulwich.object_store import MemoryObjectStore
from dulwich.objects import Blob, Tree

from gitreg.archives.format import fast_builder
from gitreg.errors import BadRequest
from gitreg.git.backend import DulwichBackend
from gitreg.git.trees import TreeReader
from gitreg.modules.globs import check_tag_pattern, tag_prefix_for
from gitreg.services import Services, build_services
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo
from tests.support.server import cli


def _module(repo: GitRepo, name: str, value: str = "1") -> None:
    repo.write(f"modules/{name}/main.tf", f'output "{name}" {{\n  value = "{value}"\n}}\n')


@pytest.fixture
def mono(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "infra")
    _module(repo, "vpc")
    _module(repo, "dns")
    repo.write("modules/common/README.md", "shared notes, not a module\n")
    repo.write("README.md", "# infra\n")
    repo.commit("two modules")
    return repo


def _add(data: Path, repo: GitRepo, *extra: str) -> str:
    args = ["repo", "add", str(repo.path), "--modules", "modules/*"]
    return cli(data, *args, "--namespace", "acme", "--system", "aws", *extra).stdout


def _sync(data: Path) -> str:
    return cli(data, "sync", "--verbose").stdout


def _versions(svc: Services, name: str) -> dict[str, str]:
    module = svc.index.find_module("acme", name, "aws")
    assert module is not None, f"acme/{name}/aws is not registered"
    return {v.version: v.archive_sha256 for v in svc.index.versions(module.id)}


def _names(svc: Services, sha256: str) -> list[str]:
    with svc.blobs.open(sha256) as blob, tarfile.open(fileobj=io.BytesIO(blob.read())) as tar:
        return tar.getnames()


def test_a_tag_for_one_module_publishes_that_module_only(tmp_path: Path, mono: GitRepo) -> None:
    data = tmp_path / "data"
    mono.tag("vpc/v1.0.0")
    out = _add(data, mono, "--tag-pattern", "{name}/v{version}")
    assert "registered modules/* as acme/{name}/aws (tags {name}/v{version})" in out
    assert "registered acme/vpc/aws (modules/vpc)" in out
    assert "registered acme/dns/aws (modules/dns)" in out
    assert "published acme/vpc/aws 1.0.0" in out
    assert "acme/dns/aws" not in out.split("registered acme/dns/aws (modules/dns)")[1]
    svc = build_services(load_settings({"data_dir": data}, environ={}))
    try:
        assert list(_versions(svc, "vpc")) == ["1.0.0"]
        assert _versions(svc, "dns") == {}
        assert svc.index.find_module("acme", "common", "aws") is None
        # The archive holds the module's directory alone, at its path (//modules/vpc).
        (sha256,) = _versions(svc, "vpc").values()
        assert _names(svc, sha256) == ["modules/vpc/main.tf"]
        assert svc.index.archive_builder(sha256) == fast_builder()
    finally:
        svc.close()
    mono.tag("dns/v0.1.0")
    synced = _sync(data)
    assert "published acme/dns/aws 0.1.0" in synced
    assert "published acme/vpc/aws" not in synced
    assert "modules/*: modules/common: no .tf file in the directory" in synced


def test_a_module_that_appears_later_is_registered_by_the_next_sync(
    tmp_path: Path, mono: GitRepo
) -> None:
    data = tmp_path / "data"
    mono.tag("vpc/v1.0.0")
    _add(data, mono, "--tag-pattern", "{name}/v{version}")
    _module(mono, "s3")
    mono.commit("s3 module")
    mono.tag("s3/v0.1.0")
    synced = _sync(data)
    assert "registered acme/s3/aws (modules/s3)" in synced
    assert "published acme/s3/aws 0.1.0" in synced
    assert "1 modules registered, 1 published" in synced
    again = _sync(data)
    assert "registered" not in again and "0 published" in again


def test_shared_tags_reuse_the_archive_of_an_unchanged_directory(
    svc: Services, mono: GitRepo, tmp_path: Path
) -> None:
    mono.tag("v1.0.0")
    _module(mono, "vpc", value="2")
    mono.commit("vpc changes, dns does not", date="2024-02-02T03:04:05Z")
    mono.tag("v1.1.0")
    _add(tmp_path / "data", mono)
    vpc, dns = _versions(svc, "vpc"), _versions(svc, "dns")
    assert set(vpc) == set(dns) == {"1.0.0", "1.1.0"}
    assert dns["1.0.0"] == dns["1.1.0"], "dns/ did not change: one archive for both"
    assert vpc["1.0.0"] != vpc["1.1.0"]


def test_whole_tree_keeps_the_repository_in_each_archive(
    svc: Services, mono: GitRepo, tmp_path: Path
) -> None:
    mono.tag("v1.0.0")
    _add(tmp_path / "data", mono, "--whole-tree")
    (vpc,) = _versions(svc, "vpc").values()
    (dns,) = _versions(svc, "dns").values()
    assert vpc == dns  # one archive of the whole tree at that commit, shared
    assert "modules/common/README.md" in _names(svc, vpc)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--modules", "modules/*"], "--modules needs --namespace and --system"),
        (
            [
                "--modules",
                "modules/*",
                "--namespace",
                "acme",
                "--system",
                "aws",
                "--tag-pattern",
                "v{version}",
            ],
            "invalid tag pattern 'v{version}'",
        ),
        (
            ["--modules", "../*", "--namespace", "acme", "--system", "aws"],
            "invalid subdirectory",
        ),
        (
            ["--module", "acme/vpc/aws", "--system", "aws"],
            "--namespace, --system, --tag-pattern and --whole-tree go with --modules",
        ),
    ],
)
def test_bad_options_are_errors_and_register_nothing(
    tmp_path: Path, mono: GitRepo, extra: list[str], message: str
) -> None:
    data = tmp_path / "data"
    failed = cli(data, "repo", "add", str(mono.path), *extra, check=False)
    assert failed.returncode != 0
    assert f"gitreg: error: {message}" in failed.stderr
    assert "registered" not in failed.stdout
    assert cli(data, "repo", "list").stdout.strip() == ""


def test_a_nested_pattern_matches_one_component_per_star(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "stacks")
    for path in ("stacks/net/aws", "stacks/dns/aws", "stacks/dns/gcp", "stacks/.hidden/aws"):
        repo.write(f"{path}/main.tf", "# module\n")
    repo.commit("stacks")
    repo.tag("v1.0.0")
    mirror = tmp_path / "mirror.git"
    backend = DulwichBackend()
    backend.fetch(str(repo.path), mirror)
    tags, _ = backend.tags(mirror)
    found = backend.module_dirs(mirror, [t.tree_sha for t in tags], "stacks/*/aws")
    assert found == {"stacks/net/aws": "", "stacks/dns/aws": ""}


@pytest.mark.parametrize(
    ("pattern", "prefix"),
    [("", ""), ("{name}/v{version}", "vpc/v"), ("release-{name}-{version}", "release-vpc-")],
)
def test_tag_pattern_gives_each_module_its_prefix(pattern: str, prefix: str) -> None:
    assert tag_prefix_for(check_tag_pattern(pattern), "vpc") == prefix


@pytest.mark.parametrize(
    "pattern",
    ["{name}", "v{version}", "{name}/{name}/{version}", "{x}{name}{version}", "-{name}/{version}"],
)
def test_bad_tag_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(BadRequest):
        check_tag_pattern(pattern)


def test_a_hostile_directory_name_never_becomes_a_module_path() -> None:
    # `*` (fnmatch) matches '/', so a crafted tree entry `x/../../evil` would
    # otherwise be registered as a module directory and used as the archive prefix.
    store = MemoryObjectStore()
    module = Tree()
    module.add(b"main.tf", 0o100644, Blob.from_string(b"# module\n").id)
    store.add_object(Blob.from_string(b"# module\n"))
    store.add_object(module)
    modules = Tree()
    for name in (b"x/../../evil", b"ok", b"bell\x07", b".GIT"):
        modules.add(name, 0o040000, module.id)
    store.add_object(modules)
    root = Tree()
    root.add(b"modules", 0o040000, modules.id)
    store.add_object(root)
    found = TreeReader(store).matching_dirs([root.id.decode()], "modules/*")
    assert found == {"modules/ok": ""}

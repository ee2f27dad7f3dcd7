"""Publishing tags as immutable versions from real git repositories."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gitreg.services import Services, build_services
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo, git, simple_module


def register(
    svc: Services, repo: GitRepo, address: str, subdir: str = "", prefix: str = ""
) -> None:
    record = svc.index.add_repo(str(repo.path), "acme/" + repo.path.name)
    ns, name, system = address.split("/")
    svc.index.add_module(record.id, ns, name, system, subdir, prefix)


def sync(svc: Services, repo: GitRepo) -> None:
    svc.publisher.sync_repo(svc.index.repo_by_url(str(repo.path)))


def versions(svc: Services, address: str) -> dict[str, str]:
    module = svc.index.find_module(*address.split("/"))
    assert module is not None
    return {v.version: v.commit_sha for v in svc.index.versions(module.id)}


def report(svc: Services, address: str) -> str:
    """What the last sync said about the module at `address`."""
    module = svc.index.find_module(*address.split("/"))
    assert module is not None
    return module.sync_report


def archive_names(svc: Services, address: str, version: str) -> list[str]:
    module = svc.index.find_module(*address.split("/"))
    assert module is not None
    found = next(v for v in svc.index.versions(module.id) if v.version == version)
    with svc.blobs.open(found.archive_sha256) as blob:
        data = blob.read()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return tar.getnames()


def test_semver_tags_are_published_and_others_reported(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    for tag in ("v1.0.0", "v1.1.0", "v2.0.0-rc1", "not-a-version"):
        repo.tag(tag)
    register(svc, repo, "acme/vpc/aws")
    sync(svc, repo)
    assert set(versions(svc, "acme/vpc/aws")) == {"1.0.0", "1.1.0", "2.0.0-rc1"}
    assert "not-a-version" in report(svc, "acme/vpc/aws")


def test_annotated_tags_are_peeled_and_all_shas_recorded(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("vpc")
    simple_module(repo)
    commit = repo.commit()
    repo.tag("v1.0.0", annotated=True)
    register(svc, repo, "acme/vpc/aws")
    sync(svc, repo)
    module = svc.index.find_module("acme", "vpc", "aws")
    assert module is not None
    (version,) = svc.index.versions(module.id)
    assert version.commit_sha == commit
    assert version.tag_sha == repo.rev("refs/tags/v1.0.0") != commit
    assert version.tree_sha == repo.rev("HEAD^{tree}")
    assert len(version.archive_sha256) == 64


def test_force_moved_tag_keeps_original_bytes_and_is_a_conflict(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("vpc")
    simple_module(repo, "first")
    first = repo.commit()
    repo.tag("v1.0.0")
    register(svc, repo, "acme/vpc/aws")
    sync(svc, repo)
    before = archive_names(svc, "acme/vpc/aws", "1.0.0")
    simple_module(repo, "second")
    repo.write("extra.tf", "# new file\n")
    repo.commit("moved", date="2024-02-01T00:00:00Z")
    repo.tag("v1.0.0", force=True)
    sync(svc, repo)
    assert versions(svc, "acme/vpc/aws") == {"1.0.0": first}
    assert archive_names(svc, "acme/vpc/aws", "1.0.0") == before
    (conflict,) = svc.index.conflicts()
    assert conflict.tag == "v1.0.0" and conflict.published_commit == first


def test_deleted_tag_keeps_the_version(svc: Services, make_repo: Callable[[str], GitRepo]) -> None:
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    register(svc, repo, "acme/vpc/aws")
    sync(svc, repo)
    repo.delete_tag("v1.0.0")
    sync(svc, repo)
    assert "1.0.0" in versions(svc, "acme/vpc/aws")


def test_v_and_plain_tags_for_different_commits_are_one_version_and_a_conflict(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("vpc")
    simple_module(repo, "a")
    first = repo.commit()
    repo.tag("1.0.0")
    register(svc, repo, "acme/vpc/aws")
    sync(svc, repo)
    simple_module(repo, "b")
    repo.commit("other")
    repo.tag("v1.0.0")
    sync(svc, repo)
    assert versions(svc, "acme/vpc/aws") == {"1.0.0": first}
    assert [c.tag for c in svc.index.conflicts()] == ["v1.0.0"]


def test_same_commit_under_both_spellings_is_no_conflict(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("1.0.0")
    repo.tag("v1.0.0")
    register(svc, repo, "acme/vpc/aws")
    sync(svc, repo)
    assert list(versions(svc, "acme/vpc/aws")) == ["1.0.0"]
    assert svc.index.conflicts() == []


def test_monorepo_modules_use_prefixes_and_share_the_archive(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("infra")
    repo.write("modules/vpc/main.tf", 'module "c" {\n  source = "../common"\n}\n')
    repo.write("modules/dns/main.tf", "# dns\n")
    repo.write("modules/common/main.tf", "# common\n")
    repo.commit()
    repo.tag("vpc/v1.2.0")
    repo.tag("dns-v0.1.0")
    register(svc, repo, "acme/vpc/aws", "modules/vpc", "vpc/")
    register(svc, repo, "acme/dns/aws", "modules/dns", "dns-")
    sync(svc, repo)
    assert list(versions(svc, "acme/vpc/aws")) == ["1.2.0"]
    assert list(versions(svc, "acme/dns/aws")) == ["0.1.0"]
    # The whole tree is archived so `../common` resolves; `//subdir` selects the module.
    assert "modules/common/main.tf" in archive_names(svc, "acme/vpc/aws", "1.2.0")


def test_missing_subdir_is_reported_not_published(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("infra")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    register(svc, repo, "acme/vpc/aws", "modules/vpc")
    sync(svc, repo)
    assert versions(svc, "acme/vpc/aws") == {}
    assert "does not exist" in report(svc, "acme/vpc/aws")


def test_resync_and_rebuild_give_byte_identical_archives(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("vpc")
    simple_module(repo)
    repo.write("scripts/run.sh", "#!/bin/sh\necho hi\n")
    (repo.path / "scripts/run.sh").chmod(0o755)
    repo.commit()
    repo.tag("v1.0.0")
    digests = []
    for run in range(2):
        services = build_services(load_settings({"data_dir": tmp_path / f"d{run}"}, environ={}))
        register(services, repo, "acme/vpc/aws")
        sync(services, repo)
        sync(services, repo)
        module = services.index.find_module("acme", "vpc", "aws")
        assert module is not None
        (version,) = services.index.versions(module.id)
        with services.blobs.open(version.archive_sha256) as blob:
            digests.append(blob.read())
        services.close()
    assert digests[0] == digests[1]
    assert gzip.decompress(digests[0])  # a real gzip stream


def test_submodule_is_left_out_and_reported(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("vpc")
    simple_module(repo)
    sha = repo.commit()
    git(repo.path, "update-index", "--add", "--cacheinfo", f"160000,{sha},vendor/lib")
    git(repo.path, "commit", "-q", "-m", "submodule")
    repo.tag("v1.0.0")
    register(svc, repo, "acme/vpc/aws")
    sync(svc, repo)
    assert "vendor/lib" not in archive_names(svc, "acme/vpc/aws", "1.0.0")
    assert "vendor/lib" in report(svc, "acme/vpc/aws")


def _object_count(mirror: Path) -> int:
    counted = git(mirror, "count-objects", "-v")
    fields = dict(line.split(": ") for line in counted.splitlines())
    return int(fields["count"]) + int(fields["in-pack"])


def test_fetch_is_incremental(svc: Services, make_repo: Callable[[str], GitRepo]) -> None:
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    register(svc, repo, "acme/vpc/aws")
    sync(svc, repo)
    mirror = svc.publisher.mirror_path(svc.index.repo_by_url(str(repo.path)))
    packs_before = set((mirror / "objects" / "pack").glob("*.pack"))
    repo.write("new.tf", "# new\n")
    repo.commit("second")
    repo.tag("v1.1.0")
    sync(svc, repo)
    objects_before = _object_count(mirror)
    sync(svc, repo)  # nothing new: nothing fetched
    assert _object_count(mirror) == objects_before
    packs_after = set((mirror / "objects" / "pack").glob("*.pack"))
    assert packs_before <= packs_after  # old packs are kept, never rewritten
    assert set(versions(svc, "acme/vpc/aws")) == {"1.0.0", "1.1.0"}


def test_fetch_staged_removes_staging_mirrors_a_killed_repo_add_left(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("hello")
    simple_module(repo)
    repo.commit()
    git_dir = svc.settings.git_dir
    git_dir.mkdir(parents=True, exist_ok=True)
    old, fresh = git_dir / "staging-0000.git", git_dir / "staging-1111.git"
    for leftover in (old, fresh):
        (leftover / "objects").mkdir(parents=True)
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    staged = svc.publisher.fetch_staged(str(repo.path))
    assert staged.is_dir() and fresh.is_dir()  # a live `repo add` may still use it
    assert not old.exists()


def test_a_sync_reads_each_tags_published_version_once(
    svc: Services, make_repo: Callable[[str], GitRepo], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning and publishing share one `version_by_key` read per (module, tag)."""
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    for tag in ("v1.0.0", "v1.1.0", "v1.2.0"):
        repo.tag(tag)
    register(svc, repo, "acme/vpc/aws")
    sync(svc, repo)
    reads: list[str] = []
    real = svc.index.version_by_key

    def counted(module_id: int, key: str) -> object:
        reads.append(key)
        return real(module_id, key)

    monkeypatch.setattr(svc.index, "version_by_key", counted)
    sync(svc, repo)  # nothing new
    assert sorted(reads) == ["1.0.0", "1.1.0", "1.2.0"]

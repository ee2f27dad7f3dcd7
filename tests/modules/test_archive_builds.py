"""gitreg/modules/builds.py: archives built in worker processes are the in-process bytes."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gitreg.archives.build import ArchiveLimits, ArchiveReport
from gitreg.archives.format import fast_builder
from gitreg.git.backend import DulwichBackend
from gitreg.modules import builds
from gitreg.modules.builds import ArchiveBuilds, ArchiveKey, Built
from gitreg.modules.publisher import Publisher
from gitreg.services import Services, build_services
from gitreg.settings import Settings, load_settings
from gitreg.storage.blobs import FileBlobStore
from gitreg.storage.records import RepoRecord
from tests.support.gitrepo import GitRepo, git

# The stall limit in these tests: well past the time two spawned workers take
# to start on a loaded machine, or the pool is declared stalled before any
# worker began the build meant to hang it.
STALL_SECONDS = 10.0


def _keys(tmp_path: Path) -> tuple[Path, list[ArchiveKey]]:
    work = GitRepo(tmp_path / "work")
    for n in range(5):
        work.write("main.tf", f'output "n" {{\n  value = {n}\n}}\n' + "# pad\n" * (200 * n))
        work.write(f"modules/m{n}/main.tf", f"# module {n}\n")
        work.commit(f"change {n}", date=f"2024-01-0{n + 1}T00:00:00Z")
        work.tag(f"v1.0.{n}")
    mirror = tmp_path / "mirror.git"
    backend = DulwichBackend()
    backend.fetch(str(work.path), mirror)
    tags, _ = backend.tags(mirror)
    keys = [ArchiveKey(t.tree_sha, "", t.commit_time) for t in tags]
    keys.append(ArchiveKey(tags[-1].tree_sha, "", 0))  # the files limit below stops it
    subtree = backend.subtree(mirror, tags[-1].tree_sha, "modules/m4")
    assert subtree is not None
    keys.append(ArchiveKey(subtree, "modules/m4", tags[-1].commit_time))
    return mirror, keys


def _build(tmp_path: Path, keys: list[ArchiveKey], mirror: Path) -> dict[ArchiveKey, Built | str]:
    blobs = FileBlobStore(tmp_path / "blobs")
    runner = ArchiveBuilds(DulwichBackend(), blobs, ArchiveLimits(max_files=20), fast_builder, 2)
    limited = ArchiveBuilds(DulwichBackend(), blobs, ArchiveLimits(max_files=1), fast_builder, 2)
    found = dict(runner.build_many(mirror, keys[:-2] + keys[-1:]))
    found.update(limited.build_many(mirror, keys[-2:-1]))
    return found


def test_builds_in_worker_processes_give_the_same_archives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror, keys = _keys(tmp_path)
    here = _build(tmp_path / "here", keys, mirror)
    monkeypatch.setattr(builds, "_WORKER_START_SECONDS", -1.0)  # always worth a process
    there = _build(tmp_path / "there", keys, mirror)
    assert there == here
    assert len({b.sha256 for b in here.values() if isinstance(b, Built)}) == len(keys) - 1
    assert "max_files=1" in str(here[keys[-2]])
    blobs = FileBlobStore(tmp_path / "there" / "blobs")
    assert all(blobs.exists(b.sha256) for b in there.values() if isinstance(b, Built))


class _DiesInWorkers(DulwichBackend):
    """Builds in the process that made it; a worker process building with it dies."""

    def __init__(self) -> None:
        super().__init__()
        self.home = os.getpid()

    def archive(self, *args: Any, **kwargs: Any) -> ArchiveReport:
        if os.getpid() != self.home:
            os._exit(1)  # as a worker killed by the OOM killer
        return super().archive(*args, **kwargs)


def test_a_dead_worker_ends_the_pool_and_the_rest_is_built_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror, keys = _keys(tmp_path)
    monkeypatch.setattr(builds, "_WORKER_START_SECONDS", -1.0)  # always worth a process
    blobs = FileBlobStore(tmp_path / "blobs")
    runner = ArchiveBuilds(_DiesInWorkers(), blobs, ArchiveLimits(), fast_builder, 2)
    found = dict(runner.build_many(mirror, keys[:4]))
    assert list(found) == keys[:1]  # built here before the pool; no error raised
    assert multiprocessing.active_children() == []
    assert not list((tmp_path / "blobs").rglob("archives-*"))  # scratch removed
    rest = runner.build_one(mirror, keys[1])  # what _Archives.get then does
    assert blobs.exists(rest.sha256)


def test_one_build_after_another_gives_each_archive_built_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """build_many takes each build's unchanged directories from the previous one's
    (gitreg/archives/cache.py), in this process and in the workers; build_one alone
    starts from nothing."""
    mirror, keys = _keys(tmp_path)
    keys = keys[:-2]  # the tags, oldest first, as the publisher asks
    blobs = FileBlobStore(tmp_path / "alone")
    alone = ArchiveBuilds(DulwichBackend(), blobs, ArchiveLimits(), fast_builder, 1)
    expected = {key: alone.build_one(mirror, key) for key in keys}
    here = ArchiveBuilds(DulwichBackend(), blobs, ArchiveLimits(), fast_builder, 1)
    assert dict(here.build_many(mirror, keys)) == expected
    monkeypatch.setattr(builds, "_WORKER_START_SECONDS", -1.0)  # always worth a process
    there = ArchiveBuilds(DulwichBackend(), blobs, ArchiveLimits(), fast_builder, 2)
    assert dict(there.build_many(mirror, keys)) == expected


class _HangsInWorkers(DulwichBackend):
    """A worker process building one of `trees` with it hangs, deaf to SIGTERM as a
    process stuck in a read can be, after noting its pid and the tree in `marks`.
    In the process that made it, that build fails at once: it would hang there too,
    and the sync with it. With `marks` removed, every build is an ordinary one."""

    def __init__(self, trees: set[str], marks: Path) -> None:
        super().__init__()
        self.home = os.getpid()
        self.trees = trees
        self.marks = marks
        for sub in ("pids", "trees"):
            (marks / sub).mkdir(parents=True)

    def archive(self, mirror: Path, tree_sha: str, *args: Any, **kwargs: Any) -> ArchiveReport:
        if tree_sha in self.trees and self.marks.exists():
            if os.getpid() == self.home:
                raise AssertionError(f"the build of {tree_sha} that hung a worker ran again here")
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            (self.marks / "pids" / str(os.getpid())).touch()
            (self.marks / "trees" / tree_sha).touch()
            time.sleep(3600)  # as a worker stuck on a read that never returns
        return super().archive(mirror, tree_sha, *args, **kwargs)

    def hung(self) -> tuple[set[int], set[str]]:
        """The pids of the workers that hung, and the trees they hung on."""
        pids = {int(p.name) for p in (self.marks / "pids").iterdir()}
        return pids, {p.name for p in (self.marks / "trees").iterdir()}


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_hung_workers_are_killed_their_builds_fail_and_the_rest_is_built_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror, keys = _keys(tmp_path)
    monkeypatch.setattr(builds, "_WORKER_START_SECONDS", -1.0)  # always worth a process
    monkeypatch.setattr(builds, "_STALL_SECONDS", STALL_SECONDS)
    blobs = FileBlobStore(tmp_path / "blobs")
    backend = _HangsInWorkers({k.tree_sha for k in keys[1:4]}, tmp_path / "marks")
    runner = ArchiveBuilds(backend, blobs, ArchiveLimits(), fast_builder, 2)
    # Another child of this process, as a server has (gitreg/server/cli.py):
    # not the pool's, so it lives on.
    bystander = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(600,))
    bystander.start()
    try:
        found = dict(runner.build_many(mirror, keys[:4]))
        assert bystander.is_alive()
    finally:
        bystander.kill()
        bystander.join()
    pids, trees = backend.hung()
    assert pids and trees  # at least one worker began a build before the stall
    assert isinstance(found.pop(keys[0]), Built)  # built here before the pool
    # What a hung worker was building failed; what no worker began is left to the
    # caller, to build here (publisher.py `_Archives.get`).
    assert found == {
        k: f"archive build did not finish within {STALL_SECONDS:.0f} s"
        for k in keys
        if k.tree_sha in trees
    }
    assert all(_gone(pid) for pid in pids)
    assert multiprocessing.active_children() == []
    assert not list((tmp_path / "blobs").rglob("archives-*"))  # scratch removed


def _tags(repo: GitRepo, count: int) -> None:
    for n in range(count):
        repo.write("main.tf", f'output "n" {{\n  value = {n}\n}}\n')
        repo.commit(f"change {n}")
        repo.tag(f"v1.0.{n}")


@dataclass
class _Synced:
    """A repository of four tags (v1.0.0-v1.0.3) registered as acme/vpc/aws in an
    index whose syncs build archives in 2 worker processes."""

    repo: GitRepo
    settings: Settings
    svc: Services
    record: RepoRecord
    module_id: int

    def publisher(self, backend: DulwichBackend) -> Publisher:
        return Publisher(self.settings, self.svc.index, self.svc.blobs, backend)


@pytest.fixture
def synced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Synced]:
    monkeypatch.setattr(builds, "_WORKER_START_SECONDS", -1.0)  # always worth a process
    repo = GitRepo(tmp_path / "vpc")
    _tags(repo, 4)
    settings = load_settings({"data_dir": tmp_path / "data", "archive_workers": 2}, environ={})
    svc = build_services(settings)
    try:
        record = svc.index.add_repo(str(repo.path), "acme/vpc")
        module = svc.index.add_module(record.id, "acme", "vpc", "aws", "", "")
        yield _Synced(repo, settings, svc, record, module.id)
    finally:
        svc.close()


@pytest.mark.slow
def test_a_sync_whose_build_hangs_a_worker_publishes_the_rest_and_reports_it(
    synced: _Synced, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The version whose build hung is reported, not published; the sync ends,
    and the next one publishes it once its build no longer hangs."""
    monkeypatch.setattr(builds, "_STALL_SECONDS", STALL_SECONDS)
    hung_tree = git(synced.repo.path, "rev-parse", "v1.0.2^{tree}")
    backend = _HangsInWorkers({hung_tree}, tmp_path / "marks")
    publisher = synced.publisher(backend)
    result = publisher.sync_repo(synced.record)
    pids, _ = backend.hung()
    assert pids and all(_gone(pid) for pid in pids)
    assert multiprocessing.active_children() == []
    index = synced.svc.index
    assert {v.version for v in index.versions(synced.module_id)} == {"1.0.0", "1.0.1", "1.0.3"}
    reason = f"v1.0.2: not published: archive build did not finish within {STALL_SECONDS:.0f} s"
    assert f"acme/vpc/aws: {reason}" in result.ignored
    found = index.find_module("acme", "vpc", "aws")
    assert found is not None and reason in json.loads(found.sync_report)
    shutil.rmtree(tmp_path / "marks")  # the build no longer hangs
    assert publisher.sync_repo(synced.record).published == ["acme/vpc/aws 1.0.2"]


def test_a_sync_whose_workers_die_builds_every_version_here(synced: _Synced) -> None:
    result = synced.publisher(_DiesInWorkers()).sync_repo(synced.record)
    assert len(result.published) == 4 and not result.ignored
    assert multiprocessing.active_children() == []

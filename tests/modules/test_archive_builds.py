"""gitreg/modules/builds.py: archives built in worker processes are the in-process bytes."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import pytest

from gitreg.archive import ArchiveLimits, ArchiveReport
from gitreg.archive_format import fast_builder
from gitreg.git.backend import DulwichBackend
from gitreg.modules import builds
from gitreg.modules.builds import ArchiveBuilds, ArchiveKey, Built
from gitreg.storage.blobs import FileBlobStore
from tests.support.gitrepo import GitRepo


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
    rest = runner.build_one(mirror, keys[1])  # what ArchiveSource.get then does
    assert blobs.exists(rest.sha256)


def test_one_build_after_another_gives_each_archive_built_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """build_many takes each build's unchanged directories from the previous one's
    (gitreg/archive_cache.py), in this process and in the workers; build_one alone
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
    """Builds in the process that made it; a worker process building with it hangs."""

    def __init__(self) -> None:
        super().__init__()
        self.home = os.getpid()

    def archive(self, *args: Any, **kwargs: Any) -> ArchiveReport:
        if os.getpid() != self.home:
            time.sleep(3600)  # as a worker stuck on a read that never returns
        return super().archive(*args, **kwargs)


def test_hung_workers_are_killed_and_the_rest_is_built_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror, keys = _keys(tmp_path)
    monkeypatch.setattr(builds, "_WORKER_START_SECONDS", -1.0)  # always worth a process
    monkeypatch.setattr(builds, "_STALL_SECONDS", 3.0)
    blobs = FileBlobStore(tmp_path / "blobs")
    runner = ArchiveBuilds(_HangsInWorkers(), blobs, ArchiveLimits(), fast_builder, 2)
    started = time.monotonic()
    found = dict(runner.build_many(mirror, keys[:4]))
    assert list(found) == keys[:1]  # built here before the pool; the hang ended it
    assert time.monotonic() - started < 60
    assert multiprocessing.active_children() == []
    assert not list((tmp_path / "blobs").rglob("archives-*"))  # scratch removed

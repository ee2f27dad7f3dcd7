"""The dulwich backend over a real network transport (git daemon on 127.0.0.1)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitreg.errors import GitError
from gitreg.git.backend import DulwichBackend
from tests.support.gitrepo import GitRepo, git
from tests.support.server import free_port


@pytest.fixture
def daemon_url(tmp_path: Path, make_repo: Callable[[str], GitRepo]) -> Iterator[str]:
    """A repository with 200 KB of incompressible content, served by `git daemon`."""
    repo = make_repo("work")
    repo.write("main.tf", "# module\n")
    (repo.path / "blob.bin").write_bytes(os.urandom(200_000))
    repo.commit()
    repo.tag("v1.0.0")
    served = tmp_path / "served"
    served.mkdir()
    git(tmp_path, "clone", "-q", "--bare", str(repo.path), str(served / "mod.git"))
    port = free_port()
    daemon = subprocess.Popen(
        [
            "git",
            "daemon",
            "--export-all",
            f"--base-path={served}",
            f"--port={port}",
            "--listen=127.0.0.1",
            "--reuseaddr",
            str(served),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        url = f"git://127.0.0.1:{port}/mod.git"
        while True:
            try:
                DulwichBackend().remote_tags(url)
                break
            except GitError:
                assert time.monotonic() < deadline, "git daemon did not start"
                time.sleep(0.1)
        yield url
    finally:
        daemon.terminate()
        daemon.wait()


def test_fetch_over_the_network_and_peel_tags(daemon_url: str, tmp_path: Path) -> None:
    backend = DulwichBackend()
    assert set(backend.remote_tags(daemon_url)) == {"v1.0.0"}
    backend.fetch(daemon_url, tmp_path / "mirror.git")
    tags, problems = backend.tags(tmp_path / "mirror.git")
    assert [t.name for t in tags] == ["v1.0.0"] and not problems


def test_second_fetch_brings_only_new_objects(
    daemon_url: str, tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    """The mirror offers its tag commits as haves, so the 200 KB blob is not sent again."""
    backend = DulwichBackend()
    mirror = tmp_path / "mirror.git"
    backend.fetch(daemon_url, mirror)
    served = tmp_path / "served" / "mod.git"
    work = GitRepo.__new__(GitRepo)
    work.path = tmp_path / "work"
    work.write("new.tf", "# a small change\n")
    work.commit("second")
    work.tag("v1.1.0")
    git(work.path, "push", "-q", str(served), "refs/tags/v1.1.0")
    packs_before = set((mirror / "objects" / "pack").glob("*.pack"))
    backend.fetch(daemon_url, mirror)
    new_packs = set((mirror / "objects" / "pack").glob("*.pack")) - packs_before
    assert sum(p.stat().st_size for p in new_packs) < 10_000
    tags, _ = backend.tags(mirror)
    assert [t.name for t in tags] == ["v1.0.0", "v1.1.0"]


def test_oversized_pack_is_abandoned(daemon_url: str, tmp_path: Path) -> None:
    backend = DulwichBackend(max_pack_bytes=50_000)
    with pytest.raises(GitError, match="exceeds 50000 bytes"):
        backend.fetch(daemon_url, tmp_path / "mirror.git")
    tags, _ = backend.tags(tmp_path / "mirror.git")
    assert tags == []  # nothing half-fetched is referenced


def test_unreachable_remote_is_a_git_error(tmp_path: Path) -> None:
    with pytest.raises(GitError):
        DulwichBackend(timeout=2).fetch(f"git://127.0.0.1:{free_port()}/x.git", tmp_path / "m.git")

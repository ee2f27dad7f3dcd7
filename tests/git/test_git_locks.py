"""What a killed fetch leaves in a mirror never stops a repository
from publishing, and a repository that cannot sync says so everywhere."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitreg.git.backend import DulwichBackend
from tests.support.gitrepo import GIT_ENV, GitRepo, simple_module
from tests.support.server import RunningServer, cli

Servers = Callable[..., RunningServer]
MIRROR = Path("git") / "1.git"  # the first registered repository's mirror


def _repo_with_one_tag(make_repo: Callable[[str], GitRepo]) -> GitRepo:
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    return repo


def _next_pack_name(url: str, mirror: Path, scratch: Path) -> str:
    """The pack the next fetch writes: its name is the hash of its objects, so
    a fetch into a copy of the mirror names it (what a killed fetch had locked)."""
    shutil.copytree(mirror, scratch)
    before = set(os.listdir(scratch / "objects" / "pack"))
    DulwichBackend().fetch(url, scratch)
    (new,) = {n for n in os.listdir(scratch / "objects" / "pack") if n.endswith(".pack")} - before
    return new.removesuffix(".pack")


def test_sync_removes_what_a_killed_fetch_left_and_publishes(
    data_dir: Path, make_repo: Callable[[str], GitRepo], tmp_path: Path
) -> None:
    repo = _repo_with_one_tag(make_repo)
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/vpc/aws")
    repo.write("later.tf", "# later\n")
    repo.commit("later")
    repo.tag("v1.1.0")
    mirror = data_dir / MIRROR
    pack = _next_pack_name(str(repo.path), mirror, tmp_path / "scratch.git")
    # Exactly what dulwich leaves when killed mid-fetch: the ref and the pack
    # index it was writing (`<name>.lock`), a pack renamed in before its index,
    # and temporary packs.
    leftovers = [
        mirror / "refs" / "tags" / "v1.1.0.lock",
        mirror / "objects" / "pack" / f"{pack}.idx.lock",
        mirror / "objects" / "pack" / "tmp_pack_Xy12ab",
        mirror / "objects" / "tmp_pack_Zq34cd",
    ]
    for path in leftovers:
        path.write_bytes(b"")
    shutil.copy(
        tmp_path / "scratch.git" / "objects" / "pack" / f"{pack}.pack", mirror / "objects" / "pack"
    )

    synced = cli(data_dir, "sync")
    assert "published acme/vpc/aws 1.1.0" in synced.stdout
    assert "removed leftovers of an interrupted fetch" in synced.stderr
    assert "Traceback" not in synced.stderr
    assert not [p for p in leftovers if p.exists()]
    assert (mirror / "objects" / "pack" / f"{pack}.idx").is_file()
    assert "(ok)" in cli(data_dir, "repo", "list").stdout


def test_a_lock_that_cannot_be_removed_is_a_clear_recorded_error(
    data_dir: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = _repo_with_one_tag(make_repo)
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/vpc/aws")
    repo.commit("later")
    repo.tag("v1.1.0")
    # A directory where dulwich wants its lock file: not a leftover gitreg
    # removes, so dulwich's FileLocked still happens.
    blocker = data_dir / MIRROR / "refs" / "tags" / "v1.1.0.lock"
    blocker.mkdir()

    failed = cli(data_dir, "sync", check=False)
    assert failed.returncode == 1
    assert "Traceback" not in failed.stderr
    (message,) = [line for line in failed.stderr.splitlines() if line.startswith("gitreg: ")]
    assert "mirror file is locked" in message and "v1.1.0.lock" in message
    listed = json.loads(cli(data_dir, "repo", "list", "--json").stdout)[0]
    assert listed["status"] == "error"
    assert "mirror file is locked" in listed["last_fetch_error"]
    assert "(error: cannot fetch" in cli(data_dir, "repo", "list").stdout

    blocker.rmdir()
    assert "published acme/vpc/aws 1.1.0" in cli(data_dir, "sync").stdout
    listed = json.loads(cli(data_dir, "repo", "list", "--json").stdout)[0]
    assert (listed["status"], listed["last_fetch_error"]) == ("ok", "")


def test_a_mirror_half_made_by_a_killed_init_is_made_again(
    data_dir: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = _repo_with_one_tag(make_repo)
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/vpc/aws", "--no-sync")
    assert "(never synced)" in cli(data_dir, "repo", "list").stdout  # not "ok"
    # dulwich's init_bare makes objects/ and refs/ first and HEAD last: a kill
    # in between leaves a directory dulwich cannot open as a repository.
    mirror = data_dir / MIRROR
    for folder in ("objects/pack", "objects/info", "refs/tags", "refs/heads"):
        (mirror / folder).mkdir(parents=True)
    (mirror / "HEAD.lock").write_bytes(b"")
    (mirror.with_name(mirror.name + ".partial") / "objects").mkdir(parents=True)

    synced = cli(data_dir, "sync")
    assert "published acme/vpc/aws 1.0.0" in synced.stdout
    assert "Traceback" not in synced.stderr
    assert (mirror / "HEAD").is_file() and not mirror.with_name("1.git.partial").exists()


def _big_repo(make_repo: Callable[[str], GitRepo], tags: int, files: int) -> GitRepo:
    """`tags` tagged commits over `files` files of incompressible text, so the
    fetch takes a while; built with one `git fast-import`, not 150 git runs."""
    repo = make_repo("big")
    stream = io.BytesIO()
    for t in range(tags):
        stream.write(f"commit refs/heads/main\nmark :{t + 1}\n".encode())
        stream.write(f"committer T <t@example.com> {1700000000 + t} +0000\n".encode())
        stream.write(f"data 9\nrelease{t:2}\n".encode())
        changed = range(files) if t == 0 else range(t % files, files, tags)
        for n in changed:
            text = (os.urandom(300).hex() + "\n").encode()
            stream.write(f"M 100644 inline files/f{n:03}.txt\ndata {len(text)}\n".encode() + text)
        stream.write(f"\nreset refs/tags/v1.{t}.0\nfrom :{t + 1}\n\n".encode())
    subprocess.run(
        ["git", "fast-import", "--quiet"],
        cwd=repo.path,
        input=stream.getvalue(),
        env={**os.environ, **GIT_ENV},
        check=True,
        timeout=60,
    )
    return repo


def _pack_started(names: set[str]) -> bool:
    return bool(names)


def _pack_renamed_in(names: set[str]) -> bool:
    """dulwich renames `tmp*.pack` to `pack-<sha>.pack`, then writes its index
    through `pack-<sha>.idx.lock`: the lock that blocked every later fetch."""
    return any(n.startswith("pack-") for n in names)


@pytest.mark.slow
@pytest.mark.parametrize("moment", [_pack_started, _pack_renamed_in])
def test_kill_9_during_repo_add_then_sync_publishes_everything(
    data_dir: Path, make_repo: Callable[[str], GitRepo], moment: Callable[[set[str]], bool]
) -> None:
    repo = _big_repo(make_repo, tags=50, files=300)
    command = [sys.executable, "-m", "gitreg", "repo", "add", str(repo.path)]
    command += ["--module", "acme/big/aws", "--data-dir", str(data_dir)]
    adding = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Kill at that moment of the fetch. Should the process be quicker than
    # this loop, it is done (or killed later); sync must work either way.
    packs = data_dir / MIRROR / "objects" / "pack"
    deadline = time.monotonic() + 60
    while adding.poll() is None and time.monotonic() < deadline:
        if packs.is_dir() and moment(set(os.listdir(packs))):
            break
        time.sleep(0.001)
    adding.send_signal(signal.SIGKILL)
    adding.wait()

    synced = cli(data_dir, "sync")
    assert "Traceback" not in synced.stderr
    listed = json.loads(cli(data_dir, "modules", "--json").stdout)
    assert len(listed[0]["versions"]) == 50
    left = sorted(os.listdir(packs))
    assert all(n.startswith("pack-") and n.endswith((".pack", ".idx")) for n in left), left
    indexed = {n.removesuffix(".idx") for n in left if n.endswith(".idx")}
    assert indexed == {n.removesuffix(".pack") for n in left if n.endswith(".pack")}
    assert json.loads(cli(data_dir, "repo", "list", "--json").stdout)[0]["status"] == "ok"


def _get(server: RunningServer, path: str, token: str = "") -> tuple[int, Any]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(server.url + path, headers=headers)
    with urllib.request.urlopen(request, context=server.ssl_context(), timeout=10) as answer:
        return answer.status, json.loads(answer.read())


@pytest.mark.slow
def test_unsyncable_repository_shows_its_error_everywhere(
    data_dir: Path, make_repo: Callable[[str], GitRepo], servers: Servers, tmp_path: Path
) -> None:
    repo = _repo_with_one_tag(make_repo)
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/vpc/aws")
    repo.path.rename(tmp_path / "moved-away")  # the remote is gone

    failed = cli(data_dir, "sync", check=False)
    assert failed.returncode == 1 and "cannot fetch" in failed.stderr
    assert "(error: cannot fetch" in cli(data_dir, "repo", "list").stdout
    listed = json.loads(cli(data_dir, "repo", "list", "--json").stdout)[0]
    assert listed["status"] == "error" and "cannot fetch" in listed["last_fetch_error"]
    cli(data_dir, "jobs", "reconcile")
    cli(data_dir, "jobs", "run", check=False)
    assert "error: cannot fetch" in cli(data_dir, "jobs", check=False).stdout

    token = cli(data_dir, "token", "create", "--scope", "admin").stdout.strip().splitlines()[-1]
    server = servers(data_dir, "--reconcile-interval", "0")
    with pytest.raises(urllib.error.HTTPError) as refused:
        _get(server, "/admin/repos")
    refused.value.close()
    assert refused.value.code == 401
    _, admin = _get(server, "/admin/repos", token)
    assert admin["repos"][0]["status"] == "error"
    assert "cannot fetch" in admin["repos"][0]["last_fetch_error"]
    # One broken repository keeps the replica in rotation, named in the body.
    status, ready = _get(server, "/readyz")
    assert status == 200
    assert [(r["id"], r["status"]) for r in ready["failing_repos"]] == [(1, "error")]

    (tmp_path / "moved-away").rename(repo.path)
    cli(data_dir, "sync")
    assert _get(server, "/readyz") == (200, {"status": "ready"})
    assert _get(server, "/admin/repos", token)[1]["repos"][0]["status"] == "ok"
    assert "(ok)" in cli(data_dir, "repo", "list").stdout

"""Durability: kill -9 while publishing and live backups."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.datadir import assert_consistent
from tests.support.gitrepo import GitRepo
from tests.support.server import RunningServer, cli

TAGS = 30


def _big_repo(repo: GitRepo) -> None:
    """Enough tags and files that a sync takes long enough to be interrupted."""
    for n in range(TAGS):
        for f in range(40):
            repo.write(f"files/{f:03}.tf", f"# release {n} file {f}\n" + "x" * (200 * f))
        repo.commit(f"release {n}", date=f"2024-01-{1 + n % 28:02}T00:00:00Z")
        repo.tag(f"v1.{n}.0")


def _count(data_dir: Path) -> int:
    db = sqlite3.connect(data_dir / "index.sqlite3", timeout=5)
    try:
        return int(db.execute("SELECT count(*) FROM module_versions").fetchone()[0])
    finally:
        db.close()


@pytest.mark.slow
def test_kill_9_during_publishing_leaves_no_half_published_version(
    data_dir: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("big")
    _big_repo(repo)
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/big/aws", "--no-sync")
    kills_mid_sync = 0
    # Kill points: early (during fetch or the first archive) and after a given
    # number of versions is committed (between blob writes and transactions).
    for early, after_versions in ((0.05, None), (0.2, None), (None, 5), (None, 15), (None, 25)):
        process = subprocess.Popen(
            [sys.executable, "-m", "gitreg", "sync", "--data-dir", str(data_dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if early is not None:
            time.sleep(early)
        else:
            while process.poll() is None and _count(data_dir) < (after_versions or 0):
                time.sleep(0.002)
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            kills_mid_sync += 1
        process.wait()
        assert_consistent(data_dir)
    assert kills_mid_sync >= 3, "the syncs finished before the kills; the test proves nothing"
    cli(data_dir, "sync")
    assert assert_consistent(data_dir) == TAGS


def _versions(server: RunningServer) -> list[str]:
    url = f"{server.url}/v1/modules/acme/vpc/aws/versions"
    with urllib.request.urlopen(url, context=server.ssl_context(), timeout=5) as answer:
        return [v["version"] for v in json.loads(answer.read())["modules"][0]["versions"]]


def test_backup_while_serving_restores_and_passes_integrity_check(
    tmp_path: Path,
    data_dir: Path,
    make_repo: Callable[[str], GitRepo],
    servers: Callable[..., RunningServer],
) -> None:
    repo = make_repo("vpc")
    repo.write("main.tf", 'output "x" {\n  value = 1\n}\n')
    repo.commit()
    repo.tag("v1.0.0")
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/vpc/aws")
    server = servers(data_dir)
    stop = threading.Event()
    errors: list[BaseException] = []

    def read_and_publish() -> None:
        n = 1
        try:
            while not stop.is_set():
                _versions(server)
                repo.commit(f"more {n}")
                repo.tag(f"v1.{n}.0")
                cli(data_dir, "sync")
                n += 1
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    worker = threading.Thread(target=read_and_publish)
    worker.start()
    try:
        time.sleep(1.0)
        backup_dir = tmp_path / "backup"
        cli(data_dir, "backup", str(backup_dir))
    finally:
        stop.set()
        worker.join()
    assert not errors
    count = assert_consistent(backup_dir)
    assert count >= 1
    restored = servers(backup_dir)
    assert len(_versions(restored)) == count

"""Shared fixtures: real git repositories, real gitreg servers, real Terraform."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.s3 import s3, shared_moto  # noqa: F401  (fixtures: a real S3 endpoint)
from tests.support.server import RunningServer, start_server

# postgres_server and postgres_database: a real PostgreSQL server, started only by
# the first test that asks for one (tests/support/postgres.py).
pytest_plugins = ("tests.support.postgres",)


@pytest.fixture
def make_repo(tmp_path: Path) -> Callable[[str], GitRepo]:
    def make(name: str = "repo") -> GitRepo:
        return GitRepo(tmp_path / name)

    return make


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def servers() -> Iterator[Callable[..., RunningServer]]:
    """Start real `gitreg serve` processes; all are stopped at the end of the test."""
    started: list[RunningServer] = []

    def start(data_dir: Path, *args: str, **kwargs: object) -> RunningServer:
        server = start_server(data_dir, *args, **kwargs)  # type: ignore[arg-type]
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()

"""Shared fixtures: real git repositories, real gitreg servers, real Terraform."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitreg.logs import ContextAndRedaction
from gitreg.services import Services, build_services
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo
from tests.support.s3 import s3, shared_moto  # noqa: F401  (fixtures: a real S3 endpoint)
from tests.support.server import SERVER_LOGS, RunningServer, start_server

# postgres_server and postgres_database: a real PostgreSQL server, started only by
# the first test that asks for one (tests/support/postgres.py); `implementation`
# and `blobs`: each store test once per engine (tests/support/backends.py).
pytest_plugins = ("tests.support.postgres", "tests.support.backends")


_ROOT_LEVEL = logging.getLogger().level


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """A test that calls `gitreg.cli.main` in this process leaves the root logger
    as a command sets it up, writing to that test's captured standard error; a
    thread the command left (a change feed) would log there once it is closed.
    Before the test's fixtures (its capture among them) are torn down, gitreg's
    handlers are taken out (pytest's own stay) and the level put back."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if any(isinstance(f, ContextAndRedaction) for f in handler.filters):
            root.removeHandler(handler)
    root.setLevel(_ROOT_LEVEL)


@pytest.fixture
def make_repo(tmp_path: Path) -> Callable[[str], GitRepo]:
    def make(name: str = "repo") -> GitRepo:
        return GitRepo(tmp_path / name)

    return make


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def services_with(data_dir: Path) -> Iterator[Callable[..., Services]]:
    """`services_with(**settings)`: the services of one gitreg process on the
    test's fresh data directory, with these settings and no environment; each is
    closed at the end of the test."""
    built: list[Services] = []

    def build(**settings: object) -> Services:
        services = build_services(load_settings({"data_dir": data_dir, **settings}, environ={}))
        built.append(services)
        return services

    yield build
    for services in built:
        services.close()


@pytest.fixture
def svc(services_with: Callable[..., Services]) -> Services:
    """The services of one gitreg process on a fresh data directory, defaults only."""
    return services_with()


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


# What must never reach a log line: a signed URL's
# signature, a bearer credential, a gitreg API token.
_LEAKS = re.compile(
    r"signature=(?!\*\*\*)[^&\s\"']+|(?i:bearer\s+)(?!\*\*\*)[^\s\"',]+|gitreg_[A-Za-z0-9_-]{43}"
)


@pytest.fixture(scope="session", autouse=True)
def _no_secrets_in_any_server_log() -> Iterator[None]:
    """Over every `gitreg serve` the session started, e2e suite included."""
    yield
    leaks = []
    for path in SERVER_LOGS:
        if path.exists():
            found = _LEAKS.search(path.read_text(errors="replace"))
            if found:
                leaks.append(f"{path}: {found.group(0)[:40]}")
    assert leaks == [], leaks

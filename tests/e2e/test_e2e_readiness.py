"""End to end: `/readyz` of a `gitreg serve` on PostgreSQL while the database
stops and starts (tests/support/postgres.py), and a replica started while it
is down.

`/readyz` must answer within Kubernetes' default probe timeout of 1 s: every
request here gives up after `PROBE_TIMEOUT`, so an answer that waits on the
database (a pool timeout of 5 s) fails the test. Its 503 names the reason
without naming the database's host. Once the database is back, readiness
returns by itself, and a route that needs the index then answers at once.
"""

from __future__ import annotations

import json
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo, released_module
from tests.support.postgres import Database, PostgresServer
from tests.support.server import RunningServer, cli

MODULE = "acme/net/aws"
VERSIONS = f"/v1/modules/{MODULE}/versions"
UNCACHED = "/v1/modules/acme/never-asked/aws/versions"  # no cache can answer it
# Generous against the 1 s required, short against the 5 s a pool timeout takes.
PROBE_TIMEOUT = 2.5
DEADLINE = 30.0


@dataclass
class Replica:
    data_dir: Path
    env: dict[str, str]
    database: Database
    servers: Callable[..., RunningServer]

    def start(self, *args: str) -> RunningServer:
        return self.servers(self.data_dir, "--reconcile-interval", "0", *args, env=self.env)


@pytest.fixture
def replica(
    postgres_server: PostgresServer,
    postgres_database: Database,
    servers: Callable[..., RunningServer],
    tmp_path: Path,
) -> Iterator[Replica]:
    """A data dir on a fresh PostgreSQL database, with MODULE 1.0.0 published."""
    key_file = tmp_path / "secret.key"
    key_file.write_text(secrets.token_hex(32) + "\n")
    key_file.chmod(0o600)
    env = {"GITREG_DATABASE_URL": postgres_database.url, "GITREG_SECRET_KEY_FILE": str(key_file)}
    made = Replica(tmp_path / "data", env, postgres_database, servers)
    repo = released_module(GitRepo(tmp_path / "repo"))
    cli(made.data_dir, "repo", "add", str(repo.path), "--module", MODULE, env=env)
    try:
        yield made
    finally:
        postgres_server.start()  # for the tests after this one


def _get(server: RunningServer, path: str) -> tuple[int, dict[str, object]]:
    """The answer's status and JSON body; raises if it takes over PROBE_TIMEOUT."""
    request = urllib.request.Request(server.url + path)
    try:
        with urllib.request.urlopen(
            request, context=server.ssl_context(), timeout=PROBE_TIMEOUT
        ) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def _until(server: RunningServer, path: str, status: int) -> dict[str, object]:
    """Ask until `path` answers `status`, each answer within PROBE_TIMEOUT."""
    deadline = time.monotonic() + DEADLINE
    while True:
        got, body = _get(server, path)
        if got == status:
            return body
        assert time.monotonic() < deadline, (got, body)
        time.sleep(0.1)


def _unavailable(body: dict[str, object], database: Database) -> str:
    errors = body["errors"]
    assert isinstance(errors, list) and len(errors) == 1, body
    problem = str(errors[0])
    assert problem.startswith("index not writable: the database is unavailable ("), problem
    host = database.url.split("@")[1].split("/")[0]
    assert host not in problem and database.name not in problem
    return problem


def test_readyz_follows_postgresql_down_and_back_without_waiting_on_it(
    replica: Replica, postgres_server: PostgresServer
) -> None:
    server = replica.start()
    assert _get(server, "/readyz") == (200, {"status": "ready"})

    postgres_server.stop("fast")
    _unavailable(_until(server, "/readyz", 503), replica.database)
    for _ in range(3):  # every answer meanwhile, not only the first
        status, body = _get(server, "/readyz")
        assert status == 503
        _unavailable(body, replica.database)
    status, body = _get(server, UNCACHED)  # needs the index: a clear 503
    assert status == 503 and "the database is unavailable" in str(body["errors"])

    postgres_server.start()
    _until(server, "/readyz", 200)
    status, body = _get(server, VERSIONS)  # ready means the index answers now
    assert status == 200, body
    assert "Traceback" not in server.log()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_replica_started_while_postgresql_is_down_waits_for_it(
    replica: Replica, postgres_server: PostgresServer, workers: str
) -> None:
    postgres_server.stop("fast")
    server = replica.start("--workers", workers)  # answers /healthz rather than exiting
    assert _get(server, "/healthz") == (200, {"status": "ok"})
    status, body = _get(server, "/readyz")
    assert status == 503
    assert "not reachable since start-up" in _unavailable(body, replica.database)
    status, body = _get(server, VERSIONS)
    assert status == 503 and "the database is unavailable" in str(body["errors"])

    postgres_server.start()
    _until(server, "/readyz", 200)
    body = _until(server, VERSIONS, 200)  # with two workers, each waits for itself
    assert [v["version"] for v in body["modules"][0]["versions"]] == ["1.0.0"]  # type: ignore[index]
    assert server.process.poll() is None
    assert "Traceback" not in server.log()

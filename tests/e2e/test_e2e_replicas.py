"""End to end: three `gitreg serve` replicas with separate data dirs
sharing one real PostgreSQL server and one S3 bucket (moto's server mode).

Real git remotes and pushes, signed forge webhooks spread over the replicas,
kill -9 of the replica running a publish, the real CLI configured only by
`GITREG_*` and `AWS_*` variables, and the real Terraform CLI.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.e2e.test_e2e_push import (
    PUBLISH_DEADLINE,
    bare_remote,
    hanging_ssh,
    module_repo,
    post,
    push,
    terraform_installs,
    versions,
    wait_for_version,
)
from tests.support.postgres import PostgresServer
from tests.support.s3 import MotoS3, S3Bucket
from tests.support.server import RunningServer, cli, start_server
from tests.support.webhooks import Prepared, delivery

SECRET = "replicas-webhook-secret"


@dataclass
class Cluster:
    root: Path
    database_url: str
    env: dict[str, str]
    replicas: list[RunningServer] = field(default_factory=list)

    def data_dir(self, number: int) -> Path:
        return self.root / f"replica-{number}"

    def start(self, number: int, extra_env: dict[str, str] | None = None) -> RunningServer:
        env = {**self.env, **(extra_env or {})}
        server = start_server(self.data_dir(number), "--reconcile-interval", "0", env=env)
        self.replicas.append(server)
        return server

    def cli(self, *args: str, replica: int = 0) -> str:
        return cli(self.data_dir(replica), *args, env=self.env).stdout

    def sql(self, query: str) -> list[tuple[object, ...]]:
        with psycopg.connect(self.database_url) as conn:
            return list(conn.execute(query).fetchall())

    def wait_until_idle(self) -> dict[str, Any]:
        deadline = time.monotonic() + PUBLISH_DEADLINE
        while True:
            listing: dict[str, Any] = json.loads(self.cli("jobs", "list", "--json"))
            counts = listing["counts"]
            if not counts["queued"] and not counts["running"]:
                return listing
            assert time.monotonic() < deadline, listing
            time.sleep(0.1)


@pytest.fixture
def cluster(
    postgres_server: PostgresServer, shared_moto: MotoS3, tmp_path: Path
) -> Iterator[Cluster]:
    database = postgres_server.create_database()
    bucket = S3Bucket(shared_moto, f"replicas-{secrets.token_hex(4)}", "registry")
    shared_moto.create_bucket(bucket.bucket)
    key_file = tmp_path / "secret.key"
    key_file.write_text(secrets.token_hex(32) + "\n")
    key_file.chmod(0o600)
    env = {
        **bucket.env(),
        "GITREG_DATABASE_URL": database.url,
        "GITREG_SECRET_KEY_FILE": str(key_file),
    }
    made = Cluster(tmp_path, database.url, env)
    yield made
    for server in made.replicas:
        server.stop()


def _three(cluster: Cluster, extra_env: dict[str, str] | None = None) -> list[RunningServer]:
    with ThreadPoolExecutor(max_workers=3) as pool:
        return list(pool.map(lambda n: cluster.start(n, extra_env), range(3)))


def test_a_webhook_to_one_replica_installs_through_another(
    cluster: Cluster, tmp_path: Path
) -> None:
    work = module_repo(tmp_path / "work", "1.0.0")
    bare = bare_remote(work, tmp_path / "git" / "acme" / "vpc.git", hook=False)
    assert push(work, "main").returncode == 0
    cluster.cli(
        "repo",
        "add",
        str(bare),
        "--module",
        "acme/vpc/null",
        "--no-sync",
        "--forge-repo",
        "acme/vpc",
        "--webhook-secret",
        SECRET,
    )
    first, _, third = _three(cluster)
    work.tag("v1.0.0")
    assert push(work, "v1.0.0").returncode == 0
    prepared = delivery("github", "push-tag-created", repo="acme/vpc", tag="v1.0.0", secret=SECRET)
    status, body, _ = post(first, prepared)
    assert status == 202, body
    published = wait_for_version(first, "acme/vpc/null", "1.0.0")
    # Replica 3 sees the publish through PostgreSQL's LISTEN/NOTIFY, not a restart.
    started = time.monotonic()
    while "1.0.0" not in versions(third, "acme/vpc/null"):
        assert time.monotonic() - started < 2.0, third.log()[-3000:]
        time.sleep(0.02)
    print(
        f"webhook -> listed on replica 1: {published:.2f}s;"
        f" then on replica 3: {time.monotonic() - started:.2f}s"
    )
    terraform_installs(third, "acme/vpc/null", "1.0.0", tmp_path / "tf")
    # Nothing a replica needs stays only in its own data dir.
    assert not (cluster.data_dir(0) / "blobs").exists()
    assert not (cluster.data_dir(0) / "index.sqlite3").exists()


def test_kill_9_of_the_replica_running_a_publish(cluster: Cluster, tmp_path: Path) -> None:
    work = module_repo(tmp_path / "work", "3.0.0")
    bare = bare_remote(work, tmp_path / "git" / "acme" / "slow.git", hook=False)
    work.tag("v3.0.0")
    assert push(work, "main", "v3.0.0").returncode == 0
    path_env, flag, pidfile = hanging_ssh(tmp_path)
    cluster.cli(
        "repo",
        "add",
        f"ssh://git.example.test{bare}",
        "--module",
        "acme/slow/null",
        "--no-sync",
        "--forge-repo",
        "acme/slow",
        "--webhook-secret",
        SECRET,
    )
    flag.touch()
    replicas = _three(cluster, path_env)
    prepared = delivery("gitea", "push-tag-created", repo="acme/slow", tag="v3.0.0", secret=SECRET)
    assert post(replicas[0], prepared)[0] == 202
    deadline = time.monotonic() + PUBLISH_DEADLINE
    while not pidfile.exists():  # some replica claimed the job and its fetch hangs
        assert time.monotonic() < deadline
        time.sleep(0.05)
    [running] = json.loads(cluster.cli("jobs", "list", "--json"))["jobs"]
    owner_pid = int(running["lease_owner"].split("/")[2])
    [victim] = [r for r in replicas if r.process.pid == owner_pid]
    victim.stop(kill=True)
    os.kill(int(pidfile.read_text()), signal.SIGKILL)  # the orphaned "ssh"
    flag.unlink()
    survivor = next(r for r in replicas if r is not victim)
    wait_for_version(survivor, "acme/slow/null", "3.0.0")
    listing = cluster.wait_until_idle()
    assert [(j["state"], j["attempts"]) for j in listing["jobs"]] == [("done", 2)]
    published = cluster.sql("SELECT version FROM module_versions")
    assert published == [("3.0.0",)]  # once, by another replica


REPOS = 10
DELIVERIES = 1000  # 30% of them repeat an earlier delivery id


def _storm(cluster: Cluster, replicas: list[RunningServer]) -> list[tuple[RunningServer, Prepared]]:
    unique: list[Prepared] = []
    for n in range(DELIVERIES * 7 // 10):
        repo = n % REPOS
        unique.append(
            delivery(
                "github",
                "push-tag-created",
                repo=f"storm/r{repo}",
                tag=f"v1.{n % 2}.0",
                delivery_id=f"storm-{n}",
                secret=SECRET,
            )
        )
    repeats = [unique[(n * 7) % len(unique)] for n in range(DELIVERIES - len(unique))]
    everything = unique + repeats
    order = sorted(range(len(everything)), key=lambda i: (i * 7919) % len(everything))
    return [(replicas[i % 3], everything[i]) for i in order]


def test_1000_deliveries_over_three_replicas_publish_each_version_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    for number in range(REPOS):
        work = module_repo(tmp_path / "work" / f"r{number}", "1.0.0")
        work.tag("v1.0.0")
        work.commit("second")
        work.tag("v1.1.0", annotated=True)
        cluster.cli(
            "repo",
            "add",
            str(work.path),
            "--module",
            f"storm/r{number}/null",
            "--no-sync",
            "--forge-repo",
            f"storm/r{number}",
            "--webhook-secret",
            SECRET,
        )
    replicas = _three(cluster)
    with ThreadPoolExecutor(max_workers=24) as pool:
        answers = list(pool.map(lambda d: post(*d), _storm(cluster, replicas)))
    assert {status for status, _, _ in answers} <= {200, 202}, [
        a for a in answers if a[0] not in (200, 202)
    ][:3]
    cluster.wait_until_idle()
    assert cluster.sql("SELECT count(*) FROM deliveries") == [(DELIVERIES * 7 // 10,)]
    published = cluster.sql(
        "SELECT m.name, v.version FROM module_versions v JOIN modules m ON m.id = v.module_id"
    )
    assert sorted(published) == sorted(
        (f"r{n}", version) for n in range(REPOS) for version in ("1.0.0", "1.1.0")
    )
    assert (
        cluster.sql("SELECT state, count(*) FROM jobs WHERE state != 'done' GROUP BY state") == []
    )


def _get(url: str, context: ssl.SSLContext, headers: dict[str, str] | None = None) -> bytes:
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        return bytes(answer.read())


def test_a_signed_url_from_one_replica_is_accepted_by_another(
    cluster: Cluster, tmp_path: Path
) -> None:
    work = module_repo(tmp_path / "work", "1.0.0")
    work.tag("v1.0.0")
    cluster.cli("repo", "add", str(work.path), "--module", "team/vpc/null")
    cluster.cli("namespace", "set", "team", "--private")
    token = cluster.cli("token", "create", "--scope", "read", "--namespace", "team")
    token = token.strip().splitlines()[-1]
    first, second, _ = _three(cluster)
    auth = {"Authorization": f"Bearer {token}"}
    request = urllib.request.Request(
        f"{first.url}/v1/modules/team/vpc/null/1.0.0/download", headers=auth
    )
    with urllib.request.urlopen(request, context=first.ssl_context(), timeout=10) as answer:
        signed = answer.headers["X-Terraform-Get"]
    assert "signature=" in signed
    path = signed[signed.index("/archives/") :] if signed.startswith("http") else signed
    archive = _get(second.url + path, second.ssl_context())  # no token: the URL is enough
    assert archive[:2] == b"\x1f\x8b"
    with pytest.raises(urllib.error.HTTPError) as unsigned:
        _get(second.url + path.split("?")[0], second.ssl_context())
    unsigned.value.close()
    assert unsigned.value.code == 403  # a private blob needs a signature or a token

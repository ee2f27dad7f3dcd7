"""End to end: moving a single-machine registry into PostgreSQL + S3
with `gitreg migrate-storage`, and a replica riding out a database outage.

Real `gitreg serve` processes, the real CLI, a real PostgreSQL server that the
test stops and starts, moto's S3 server, and the real Terraform CLI.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path

import psycopg

from tests.metrics.scrape import fetch, parse, value
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.postgres import PostgresServer
from tests.support.s3 import MotoS3, S3Bucket
from tests.support.server import RunningServer, cli, free_port, start_server
from tests.support.terraform import run_terraform


def _key_file(tmp_path: Path) -> Path:
    key_file = tmp_path / "secret.key"
    key_file.write_text(secrets.token_hex(32) + "\n")
    key_file.chmod(0o600)
    return key_file


def _bucket(moto: MotoS3) -> S3Bucket:
    bucket = S3Bucket(moto, f"moves-{secrets.token_hex(4)}", "registry")
    moto.create_bucket(bucket.bucket)
    return bucket


def _fetch(server: RunningServer, path: str) -> tuple[int, Message, bytes]:
    try:
        with urllib.request.urlopen(
            server.url + path, context=server.ssl_context(), timeout=10
        ) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as error:
        with error:  # closes its connection, or the socket leaks (ResourceWarning)
            return error.code, error.headers, error.read()


def _invalidations(metrics_port: int) -> float:
    status, text = fetch(f"http://127.0.0.1:{metrics_port}/metrics")
    assert status == 200, text
    return value(parse(text), "gitreg_cache_evictions_total", reason="invalidated")


def _hold_in_cache(server: RunningServer, metrics_port: int, path: str) -> None:
    """Fetch `path` until its answer stays in the metadata cache: the server's
    start writes too (the change feed's first poll, the statements' backfill
    marker), and each write it notices empties the cache."""
    deadline = time.monotonic() + 60
    while True:
        before = _invalidations(metrics_port)
        assert _fetch(server, path)[0] == 200
        # Longer than the change feed's poll plus the cache watcher's interval.
        time.sleep(2)
        if _invalidations(metrics_port) == before:
            return
        assert time.monotonic() < deadline, server.log()[-3000:]


def _archives(server: RunningServer, address: str) -> dict[str, str]:
    """version -> sha256 of the archive bytes Terraform would download."""
    status, _, body = _fetch(server, f"/v1/modules/{address}/versions")
    assert status == 200, body
    found = {}
    for entry in json.loads(body)["modules"][0]["versions"]:
        _, headers, _ = _fetch(server, f"/v1/modules/{address}/{entry['version']}/download")
        link = headers["X-Terraform-Get"]
        path = link[link.index("/archives/") :]
        status, _, archive = _fetch(server, path)
        assert status == 200
        found[entry["version"]] = hashlib.sha256(archive).hexdigest()
    return found


def _init(server: RunningServer, address: str, workdir: Path) -> bytes:
    workdir.mkdir(parents=True)
    (workdir / "main.tf").write_text(
        f'module "m" {{\n  source  = "{server.host}/{address}"\n  version = "1.1.0"\n}}\n'
    )
    run_terraform(workdir, "init", ca_pem=server.ca_pem)
    return (workdir / ".terraform/modules/m/main.tf").read_bytes()


def test_a_moved_registry_serves_the_same_versions_and_bytes(
    postgres_server: PostgresServer, shared_moto: MotoS3, tmp_path: Path
) -> None:
    old_dir = tmp_path / "single-machine"
    repo = GitRepo(tmp_path / "vpc")
    simple_module(repo, "1.0.0")
    repo.commit("one")
    repo.tag("v1.0.0")
    simple_module(repo, "1.1.0")
    repo.commit("two")
    repo.tag("v1.1.0")
    cli(old_dir, "repo", "add", str(repo.path), "--module", "acme/vpc/null")
    token = cli(old_dir, "token", "create", "--scope", "read").stdout.strip().splitlines()[-1]
    cli(old_dir, "key", "generate", "acme")
    database = postgres_server.create_database()
    bucket = _bucket(shared_moto)
    # The moving command runs with the old registry's settings: S3 only as a target.
    aws = {k: v for k, v in bucket.env().items() if k != "GITREG_BLOB_STORE"}
    env = {**aws, "GITREG_SECRET_KEY_FILE": str(_key_file(tmp_path))}
    move = ["migrate-storage", "--to-database-url", database.url, "--to-blob-store", bucket.url]
    old = start_server(old_dir)
    try:
        before = _archives(old, "acme/vpc/null")
        module_before = _init(old, "acme/vpc/null", tmp_path / "tf-old")
        first = cli(old_dir, *move, env=env)  # while the old server keeps serving
    finally:
        old.stop()
    assert "copied 2 blob(s) (0 already there" in first.stdout, first.stdout
    assert "[##############################]" in first.stderr  # the progress bar
    again = cli(old_dir, *move, env=env)  # resumable and idempotent
    assert "copied 0 blob(s) (2 already there" in again.stdout, again.stdout
    # The old server flushed its download counts when it stopped, after the
    # first copy: this run adds those rows, and a third adds nothing.
    settled = cli(old_dir, *move, env=env)
    assert " and 0 row(s)" in settled.stdout, settled.stdout

    shared = {
        **env,
        "GITREG_DATABASE_URL": database.url,
        "GITREG_BLOB_STORE": bucket.url,
        "GITREG_S3_ADDRESSING": "path",
    }
    new = start_server(tmp_path / "replica", env=shared)
    try:
        assert _archives(new, "acme/vpc/null") == before
        assert _init(new, "acme/vpc/null", tmp_path / "tf-new") == module_before
    finally:
        new.stop()
    tokens = cli(tmp_path / "replica", "token", "list", env=shared).stdout
    assert token[:8] in tokens, tokens
    with psycopg.connect(database.url) as conn:
        names = [row[0] for row in conn.execute("SELECT name FROM secrets")]
    # The provider key's secret half and the URL-signing keys moved, sealed.
    assert any(name.startswith("keys/acme/") for name in names), names
    assert "secrets/url-signing.keys" in names, names


def test_a_database_outage_is_503_for_writes_while_cached_metadata_serves(
    postgres_server: PostgresServer, shared_moto: MotoS3, tmp_path: Path
) -> None:
    database = postgres_server.create_database()
    bucket = _bucket(shared_moto)
    env = {
        **bucket.env(),
        "GITREG_DATABASE_URL": database.url,
        "GITREG_BLOB_STORE": bucket.url,
        "GITREG_SECRET_KEY_FILE": str(_key_file(tmp_path)),
    }
    repo = GitRepo(tmp_path / "vpc")
    simple_module(repo, "1.0.0")
    repo.commit()
    repo.tag("v1.0.0")
    cli(tmp_path / "data", "repo", "add", str(repo.path), "--module", "acme/vpc/null", env=env)
    metrics_port = free_port()
    server = start_server(
        tmp_path / "data",
        "--reconcile-interval",
        "0",
        "--metrics-listen",
        f"127.0.0.1:{metrics_port}",
        env=env,
    )
    try:
        cached = "/v1/modules/acme/vpc/null/versions"
        _hold_in_cache(server, metrics_port, cached)
        with postgres_server.down():
            status, _, body = _fetch(server, cached)
            assert (status, json.loads(body)["modules"][0]["versions"][0]["version"]) == (
                200,
                "1.0.0",
            )
            status, headers, body = _fetch(server, "/v1/modules/acme/other/null/versions")
            assert status == 503, body
            assert json.loads(body)["errors"]
            assert int(headers["Retry-After"]) > 0
            status, headers, _ = _fetch(server, "/readyz")
            assert status == 503
        deadline = time.monotonic() + 30
        while _fetch(server, "/v1/modules/acme/other/null/versions")[0] != 404:
            assert time.monotonic() < deadline, server.log()[-3000:]
            time.sleep(0.2)
        # /readyz answers from health state refreshed in the background: ready
        # again within its refresh, not necessarily at the first query that works.
        while _fetch(server, "/readyz")[0] != 200:
            assert time.monotonic() < deadline, server.log()[-3000:]
            time.sleep(0.2)
    finally:
        server.stop()

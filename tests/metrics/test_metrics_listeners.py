"""Where /metrics is served: `--metrics-listen` (plain HTTP, no token, and then
not on the main listener), and `--workers 2` summing every worker's counters."""

from __future__ import annotations

import socket
import time
import urllib.request
from pathlib import Path

import pytest

from gitreg.errors import ConfigError
from gitreg.settings import load_settings
from tests.metrics.scrape import fetch, parse, value, wait_for
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.server import cli, cli_process, free_port, start_server

DISCOVERY = "/.well-known/terraform.json"


def test_metrics_listen_serves_without_a_token_and_hides_the_main_route(tmp_path: Path) -> None:
    data = tmp_path / "data"
    repo = GitRepo(tmp_path / "vpc")
    simple_module(repo, "hello")
    repo.commit()
    repo.tag("v1.0.0")
    cli(data, "repo", "add", str(repo.path), "--module", "acme/vpc/null")
    port = free_port()
    per_module = {"GITREG_METRICS_PER_MODULE": "true"}
    server = start_server(data, "--metrics-listen", f"127.0.0.1:{port}", env=per_module)
    try:
        assert fetch(server.url + DISCOVERY, None, server.ssl_context())[0] == 200
        download = "/v1/modules/acme/vpc/null/1.0.0/download"
        assert fetch(server.url + download, None, server.ssl_context())[0] == 204
        status, text = fetch(f"http://127.0.0.1:{port}/metrics")
        assert status == 200
        samples = parse(text)
        assert value(samples, "gitreg_http_requests_total", route=DISCOVERY, status="200") == 1
        # metrics_per_module: the download counter names the module.
        assert value(samples, "gitreg_downloads_total", module="acme/vpc/null") == 1
        admin = cli(data, "token", "create", "--scope", "admin").stdout.split()[-1]
        assert fetch(server.url + "/metrics", admin, server.ssl_context())[0] == 404
        assert "metrics at http://127.0.0.1:" in server.log()
    finally:
        server.stop()


def test_metrics_listen_must_be_host_and_port(tmp_path: Path) -> None:
    for bad in ("localhost", "127.0.0.1:http", "127.0.0.1:70000", "127.0.0.1:²"):
        with pytest.raises(ConfigError, match="HOST:PORT"):
            load_settings({"data_dir": tmp_path, "metrics_listen": bad}, environ={})


@pytest.mark.slow
@pytest.mark.parametrize("where", ["main", "metrics_listen"])
def test_two_workers_sum_their_counters(tmp_path: Path, where: str) -> None:
    data = tmp_path / "data"
    stale = data / "prometheus-multiproc" / "counter_1.db"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"left over by an earlier run")  # removed at start, never summed
    admin = cli(data, "token", "create", "--scope", "admin").stdout.split()[-1]
    port = free_port()
    listen = ("--metrics-listen", f"127.0.0.1:{port}") if where == "metrics_listen" else ()
    server = start_server(data, "--workers", "2", "--job-workers", "0", *listen)
    try:
        assert not stale.exists()
        context = server.ssl_context()

        def workers() -> set[str]:
            return {p.stem.rsplit("_", 1)[1] for p in stale.parent.glob("counter_*.db")}

        # A new connection each: the kernel hands them to whichever worker
        # accepts first, which on a busy machine can be the same one for a
        # while, so requests go on until both have counted some.
        sent, deadline = 0, time.monotonic() + 60
        while sent < 60 or len(workers()) < 2:
            assert time.monotonic() < deadline, f"one worker took all {sent} connections"
            request = urllib.request.Request(
                server.url + DISCOVERY, headers={"Connection": "close"}
            )
            with urllib.request.urlopen(request, context=context) as answer:
                assert answer.status == 200
            sent += 1

        def scrape() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
            if listen:  # served by the supervisor process, from the workers' files
                status, text = fetch(f"http://127.0.0.1:{port}/metrics")
            else:  # whichever worker takes the scrape reads every worker's files
                status, text = fetch(server.url + "/metrics", admin, context)
            assert status == 200, text
            return parse(text)

        samples = wait_for(
            scrape,
            lambda s: value(s, "gitreg_http_requests_total", route=DISCOVERY) >= sent,
        )
        assert value(samples, "gitreg_http_requests_total", route=DISCOVERY, status="200") == sent
        # Each worker wrote its own files; the supervisor and its start-up
        # child record nothing (gitreg.metrics.enable runs in create_app only).
        assert len(workers()) == 2
    finally:
        server.stop()


def test_a_metrics_port_in_use_stops_serve_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        where = ["--port", str(free_port()), "--metrics-listen", f"127.0.0.1:{port}"]
        text = ["--log-format", "text"]  # (JSON logs make it one JSON object)
        result = cli_process(tmp_path / "data", "serve", *where, *text, check=False, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"gitreg: error: metrics_listen 127.0.0.1:{port}: Address already in use"
    )

"""What `gitreg serve` says while it starts: every line JSON when logs are JSON
(docs/operations.md, "Logs"), and a port it cannot listen on refused in one
line before it claims to serve."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import cli_process, free_port, start_server


def test_every_line_a_json_server_writes_is_json(tmp_path: Path) -> None:
    metrics = f"127.0.0.1:{free_port()}"
    server = start_server(
        tmp_path / "data", "--metrics-listen", metrics, env={"GITREG_LOG_FORMAT": "json"}
    )
    server.stop()
    lines = [json.loads(line) for line in server.log().splitlines()]  # stdout and stderr
    said = [line["msg"] for line in lines if line["logger"] == "gitreg.server"]
    assert said[0] == f"metrics at http://{metrics}/metrics"
    assert said[1].startswith("at most ")
    assert said[2].startswith("Serving HTTPS with a certificate from gitreg's local CA")
    assert said[3:] == [
        f"data dir {server.data_dir}",
        f"serving {server.url} (discovery at {server.url}/.well-known/terraform.json)",
    ]


@contextlib.contextmanager
def _taken_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_a_port_in_use_is_one_line_before_anything_is_served(
    tmp_path: Path, log_format: str
) -> None:
    data = tmp_path / "data"
    with _taken_port() as port:
        ran = cli_process(
            data, "serve", "--port", str(port), "--log-format", log_format, check=False
        )
    assert ran.returncode != 0
    why = f"cannot listen on 127.0.0.1:{port}: Address already in use"
    if log_format == "text":
        assert (ran.stdout, ran.stderr) == ("", f"gitreg: error: {why}\n")
    else:
        assert ran.stdout == ""
        line = json.loads(ran.stderr)  # exactly one object
        assert (line["level"], line["msg"]) == ("error", why)
    assert not data.exists()  # refused before anything was made

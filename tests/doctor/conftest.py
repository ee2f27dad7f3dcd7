"""A data dir the doctor finds clean, and a real HTTP server standing in for
public_url: it answers Terraform's discovery document with a Date header
that can be set off by any number of seconds."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gitreg.cli import main


class DiscoveryServer(ThreadingHTTPServer):
    clock_offset: float = 0.0  # seconds added to the Date header it sends


class _Discovery(BaseHTTPRequestHandler):
    server: DiscoveryServer

    def do_GET(self) -> None:
        body = json.dumps({"modules.v1": "/v1/modules/"}).encode()
        status = 200 if self.path == "/.well-known/terraform.json" else 404
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def date_time_string(self, timestamp: float | None = None) -> str:
        return formatdate(time.time() + self.server.clock_offset, usegmt=True)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def discovery() -> Iterator[DiscoveryServer]:
    server = DiscoveryServer(("127.0.0.1", 0), _Discovery)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


@dataclass
class Setup:
    data: Path
    public_url: str
    config: dict[str, Any] = field(default_factory=dict)

    def write_config(self, **changes: Any) -> None:
        """gitreg.toml in the data dir, which every command reads."""
        self.config.update(changes)
        lines = [f"{key} = {json.dumps(value)}" for key, value in self.config.items()]
        (self.data / "gitreg.toml").write_text("\n".join(lines) + "\n")

    def run(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main([*args, "--data-dir", str(self.data)])
        return code, capsys.readouterr().out

    def doctor(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
        """Exit code and {check name: result dict} of `gitreg doctor --json`."""
        code, out = self.run(capsys, "doctor", "--json", "--timeout", "5", *args)
        document = json.loads(out)
        assert document["ok"] == (code == 0)
        return code, {c["check"]: c for c in document["checks"]}


@pytest.fixture
def setup(tmp_path: Path, discovery: DiscoveryServer) -> Setup:
    """What the doctor passes: a 0700 data dir, TLS at a proxy, public_url
    answering, no mirror upstream to reach from the test machine."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    found = Setup(data, f"http://127.0.0.1:{discovery.server_address[1]}")
    found.write_config(no_tls=True, public_url=found.public_url, mirror_allow="")
    return found

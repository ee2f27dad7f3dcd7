"""A module page of the web UI served from its page cache (target: p99 < 5 ms).

In process, no network: gitreg's whole ASGI app (router, access-log middleware
with JSON lines into /dev/null, the reader's cookie check, the page cache) is
called with a GET of a module page, against the baseline measured in the same
run: a bare Starlette app whose one route returns an HTMLResponse of the same
bytes. The module is published from a real git repository: a 6 kB README, 40
inputs, 10 outputs, a submodule and an example. Also measured: the same page
rendered on every request (page cache emptied each time; the record stays in
the metadata cache), i.e. the first view after a publish.

    python bench/ui.py [--requests 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib as b
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import Message

from gitreg import logs
from gitreg.app import create_app
from gitreg.settings import load_settings
from gitreg.ui.pages import SECURITY_HEADERS, PageCache

PATH = "/modules/acme/bench/aws"


def _repo(root: Path) -> Path:
    repo = root / "terraform-aws-bench"
    (repo / "modules/sub").mkdir(parents=True)
    (repo / "examples/basic").mkdir(parents=True)
    variables = "".join(
        f'variable "input_{i}" {{\n  type        = string\n  description = "Input {i}."\n'
        + ("" if i % 4 == 0 else f'  default     = "value-{i}"\n')
        + "}\n"
        for i in range(40)
    )
    outputs = "".join(f'output "out_{i}" {{\n  value = var.input_{i}\n}}\n' for i in range(10))
    (repo / "main.tf").write_text(variables + outputs)
    words = "The network module builds subnets, routes and gateways for a team. " * 90
    (repo / "README.md").write_text(f'# Bench\n\n{words}\n\n```hcl\nmodule "x" {{}}\n```\n')
    (repo / "modules/sub/main.tf").write_text('variable "x" {}\n')
    (repo / "examples/basic/main.tf").write_text('module "b" {\n  source = "../.."\n}\n')
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com"}
    env |= {
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@example.com",
        "PATH": "/usr/bin:/bin",
    }
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["commit", "-qm", "x"],
        ["tag", "v1.2.0"],
    ):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    return repo


def _scope() -> dict[str, Any]:
    return {
        "type": "http",
        "http_version": "1.1",
        "scheme": "https",
        "method": "GET",
        "path": PATH,
        "raw_path": PATH.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"registry.example.com"), (b"accept", b"text/html")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 443),
        "state": {},
    }


class _Collect:
    def __init__(self) -> None:
        self.body = b""
        self.status = 0

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        else:
            self.body += message.get("body", b"")


async def _receive() -> Message:
    return {"type": "http.request", "body": b""}


async def _once(app: Any) -> tuple[float, _Collect]:
    sink = _Collect()
    started = time.perf_counter()
    await app(_scope(), _receive, sink)
    return (time.perf_counter() - started) * 1000, sink


async def _series(app: Any, requests: int, before: Any = None) -> list[float]:
    times = []
    for _ in range(requests):
        if before is not None:
            before()
        elapsed, sink = await _once(app)
        b.require(sink.status == 200, f"answer {sink.status}")
        times.append(elapsed)
    return times


def _bare(body: bytes) -> Starlette:
    async def page(request: Request) -> Response:
        return HTMLResponse(body, headers=SECURITY_HEADERS)

    return Starlette(routes=[Route(PATH, page)])


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _measure(root: Path, requests: int, rounds: int) -> list[list[object]]:
    data = root / "data"
    settings = load_settings(
        {"data_dir": data, "public_url": "https://registry.example.com"}, environ={}
    )
    app = create_app(settings)
    svc = app.state.services
    record = svc.index.add_repo(str(_repo(root)), "")
    svc.index.add_module(record.id, "acme", "bench", "aws", "", "")
    svc.publisher.sync_repo(record)
    _, first = await _once(app)  # renders and caches
    b.require(first.status == 200, "the module page does not render")
    bare = _bare(first.body)
    state = app.state.ui

    def empty_page_cache() -> None:
        state.pages = PageCache()

    runs: dict[str, list[float]] = {
        "bare HTMLResponse": [],
        "gitreg, page cached": [],
        "gitreg, rendered": [],
    }
    for _ in range(rounds):
        runs["bare HTMLResponse"] += await _series(bare, requests)
        runs["gitreg, page cached"] += await _series(app, requests)
        runs["gitreg, rendered"] += await _series(app, max(requests // 10, 50), empty_page_cache)
    svc.close()
    size = len(first.body)
    return [
        [name, len(t), size, f"{statistics.median(t):.3f}", f"{_p(t, 0.99):.3f}", f"{max(t):.3f}"]
        for name, t in runs.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with (
        open("/dev/null", "w") as sink,
        tempfile.TemporaryDirectory(prefix="gitreg-bench-ui-") as tmp,
    ):
        logs.configure("json", "info", stream=sink)
        rows = asyncio.run(_measure(Path(tmp), args.requests, args.rounds))
    print(b.machine_line())
    print()
    print(b.table(["server", "requests", "page bytes", "p50 ms", "p99 ms", "max ms"], rows))


if __name__ == "__main__":
    main()

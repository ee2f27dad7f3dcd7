"""The access line's cost per request, in process.

Drives gitreg's AccessLog middleware around a trivial ASGI app that answers a
fixed 200 with a route template in its scope, as Starlette's router leaves it,
with metrics on (as `gitreg serve` has them) and logging configured the way
`gitreg serve` does, JSON and text, into /dev/null. Reports microseconds per
request over the bare app, for: middleware with the access line off, and on.

    python bench/access_log.py [--requests 50000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from gitreg import logs
from gitreg.metrics import service as metrics
from gitreg.server.access_log import AccessLog

ROUTE = "/v1/modules/{namespace}/{name}/{system}/versions"
BODY = b'{"modules":[{"versions":[]}]}'


class _Route:
    path = ROUTE


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    scope["route"] = _Route()  # what Starlette's router sets on a match
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": BODY})


async def _noop_send(message: Message) -> None:
    return None


async def _noop_receive() -> Message:
    return {"type": "http.request", "body": b""}


def _scope() -> dict[str, Any]:
    return {
        "type": "http",
        "method": "GET",
        "path": "/v1/modules/acme/bench/aws/versions",
        "headers": [(b"host", b"127.0.0.1"), (b"user-agent", b"Terraform/1.9.0")],
        "client": ("127.0.0.1", 50000),
        "state": {},
    }


async def _run(app: Any, requests: int) -> float:
    started = time.perf_counter()
    for _ in range(requests):
        await app(_scope(), _noop_receive, _noop_send)
    return (time.perf_counter() - started) / requests * 1e6


def measure(requests: int, rounds: int, log_format: str) -> dict[str, float]:
    with open("/dev/null", "w") as sink:
        logs.configure(log_format, "info", stream=sink)
        apps = {
            "bare app": _app,
            "access line off": AccessLog(_app, enabled=False),
            "access line on": AccessLog(_app, enabled=True),
        }
        runs: dict[str, list[float]] = {name: [] for name in apps}
        for _ in range(rounds):
            for name, app in apps.items():
                runs[name].append(asyncio.run(_run(app, requests)))
        logging.getLogger().handlers.clear()
    return {name: statistics.median(values) for name, values in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    metrics.enable(per_module=False)
    print("| log format | bare app us/req | + middleware, line off | + access line (JSON/text) |")
    print("|---|---|---|---|")
    for log_format in ("json", "text"):
        result = measure(args.requests, args.rounds, log_format)
        bare = result["bare app"]
        print(
            f"| {log_format} | {bare:.1f} | +{result['access line off'] - bare:.1f} |"
            f" +{result['access line on'] - bare:.1f} |"
        )


if __name__ == "__main__":
    main()

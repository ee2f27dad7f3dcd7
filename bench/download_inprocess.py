"""One module download answer's cost in process.

Calls gitreg's whole ASGI app (`create_app` with default settings: access line
on, JSON into /dev/null, metrics on) with a prepared scope for
`GET /v1/modules/NS/NAME/SYS/VERSION/download`, and a bare Starlette app whose
one route answers the same 204, in alternating rounds. Reports microseconds per
request of each and of gitreg minus bare: gitreg's own Python per answer, the
part bench/metadata.py's req/s ratio moves with. Pin it to one core
(`taskset -c 1`); run it with PYTHONPATH=TREE for another tree.

    python bench/download_inprocess.py [--requests 5000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

import benchlib as b
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message

from gitreg import logs
from gitreg.app import create_app
from gitreg.settings import load_settings

MODULE = "acme/bench/aws"
ROUTE = "/v1/modules/{namespace}/{name}/{system}/{version}/download"


async def _bare(request: Request) -> Response:
    return Response(status_code=204, headers={"X-Terraform-Get": "https://x/archives/a.tar.gz"})


async def _receive() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _send(message: Message) -> None:
    pass


async def _per_request(app: ASGIApp, path: str, requests: int) -> float:
    scope = b.asgi_get(path, "wrk", {"version": "3.0"})
    started = time.perf_counter()
    for _ in range(requests):
        await app({**scope, "state": {}}, _receive, _send)
    return (time.perf_counter() - started) / requests * 1e6


async def _measure(gitreg: Starlette, path: str, args: argparse.Namespace) -> str:
    bare = Starlette(routes=[Route(ROUTE, _bare)])
    rounds: dict[str, list[float]] = {"gitreg": [], "bare": []}
    async with gitreg.router.lifespan_context(gitreg):
        await _per_request(gitreg, path, 100)  # fills the metadata cache
        for _ in range(args.rounds):
            rounds["gitreg"].append(await _per_request(gitreg, path, args.requests))
            rounds["bare"].append(await _per_request(bare, path, args.requests))
    mine, theirs = statistics.median(rounds["gitreg"]), statistics.median(rounds["bare"])
    diffs = [round(g - x, 1) for g, x in zip(rounds["gitreg"], rounds["bare"], strict=True)]
    return (
        f"download in process, median of {args.rounds} rounds x {args.requests}: gitreg"
        f" {mine:.1f} us, bare Starlette {theirs:.1f} us, gitreg - bare {mine - theirs:.1f} us"
        f" (per round {diffs})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with b.workspace("download-inprocess") as ws, open(os.devnull, "w") as null:
        src = b.synthetic_repo(ws / "module.git", files=12, tags=3, small=True)
        b.gitreg_cli(ws / "data", "repo", "add", str(src.path), "--module", MODULE)
        path = f"/v1/modules/{MODULE}/{src.tags[-1].lstrip('v')}/download"
        logs.configure("json", "INFO", null)  # as `gitreg serve` logs when not on a terminal
        app = create_app(load_settings({"data_dir": Path(ws / "data")}, environ={}))
        print(asyncio.run(_measure(app, path, args)))


if __name__ == "__main__":
    main()

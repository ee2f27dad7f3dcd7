"""One hosted archive download's cost in process.

Calls gitreg's whole ASGI app (`create_app` with default settings: access line
on, JSON into /dev/null, metrics on) with a prepared scope for
`GET /archives/SHA256.tar.gz` of a 10 KB and a 1 MB blob from the local blob
store, the body sent to a `send` that drops it, the client staying connected
(uvicorn's ASGI spec 2.3: Starlette listens for a disconnect alongside). Each
round runs a worker process of the baseline tree (`--baseline REV`, a copy of
that revision's `gitreg/`) and one of this tree, in turns, pinned to CPU 1.
Reports per request: wall microseconds, CPU microseconds of the whole process
(worker threads included) and thread-pool trips (`anyio.to_thread.run_sync`
calls, counted in a separate pass). The page cache holds both blobs, as it
does for a registry's popular archives.

    python bench/blob_inprocess.py [--baseline c67eb7b] [--requests 3000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import benchlib as b

SIZES = {"10 KB": 10_000, "1 MB": 1_000_000}


async def _per_request(app: Any, sha256: str, requests: int) -> tuple[float, float]:
    """Wall and process CPU microseconds per GET of the blob."""
    import anyio

    path = f"/archives/{sha256}.tar.gz"
    scope = b.asgi_get(path, "bench", {"version": "3.0", "spec_version": "2.3"})  # as uvicorn says

    async def receive() -> dict[str, Any]:
        await anyio.sleep_forever()  # connected until the answer ends
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        pass

    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(requests):
        await app({**scope, "state": {}}, receive, send)
    done = time.perf_counter() - wall, time.process_time() - cpu
    return done[0] / requests * 1e6, done[1] / requests * 1e6


async def _measure(app: Any, names: dict[str, str], requests: int) -> dict[str, Any]:
    import anyio.to_thread

    results: dict[str, Any] = {}
    trips = 0
    real = anyio.to_thread.run_sync

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal trips
        trips += 1
        return await real(*args, **kwargs)

    async with app.router.lifespan_context(app):
        for label, sha256 in names.items():
            await _per_request(app, sha256, 200)  # the access snapshot, warm code paths
            trips = 0
            anyio.to_thread.run_sync = counted  # type: ignore[assignment]
            try:
                await _per_request(app, sha256, 200)
            finally:
                anyio.to_thread.run_sync = real
            wall, cpu = await _per_request(app, sha256, requests)
            results[label] = {"us": wall, "cpu_us": cpu, "trips": trips / 200}
    return results


def worker(data: Path, names: dict[str, str], requests: int) -> None:
    from gitreg import logs
    from gitreg.app import create_app
    from gitreg.settings import load_settings

    with open(os.devnull, "w") as null:
        logs.configure("json", "INFO", null)  # as `gitreg serve` logs when not on a terminal
        app = create_app(load_settings({"data_dir": data}, environ={}))
        print(json.dumps(asyncio.run(_measure(app, names, requests))))


def _in_worker(tree: Path, data: Path, names: dict[str, str], requests: int) -> dict[str, Any]:
    command = [b.PYTHON, str(Path(__file__).resolve()), "--worker", str(data)]
    command += ["--names", json.dumps(names), "--requests", str(requests)]
    done = subprocess.run(
        b.pinned(command, b.SERVER_CPU),
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stdout + done.stderr)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _report(args: argparse.Namespace, runs: dict[str, list[dict[str, Any]]]) -> str:
    rows = []
    for label in SIZES:

        def med(tree: str, key: str, label: str = label) -> float:
            return float(statistics.median(run[label][key] for run in runs[tree]))

        rows.append(
            [
                label,
                f"{med('before', 'us'):.1f} / {med('after', 'us'):.1f}",
                f"{med('after', 'us') - med('before', 'us'):+.1f}",
                f"{med('before', 'cpu_us'):.1f} / {med('after', 'cpu_us'):.1f}",
                f"{med('after', 'cpu_us') - med('before', 'cpu_us'):+.1f}",
                f"{med('before', 'trips'):g} / {med('after', 'trips'):g}",
            ]
        )
    headers = [
        "archive GET",
        f"us/request {args.baseline} / now",
        "change",
        "CPU us/request before / now",
        "change",
        "thread-pool trips before / now",
    ]
    rounds = "; ".join(
        f"{label}: "
        + ", ".join(
            f"{before[label]['cpu_us']:.0f}/{after[label]['cpu_us']:.0f}"
            for before, after in zip(runs["before"], runs["after"], strict=True)
        )
        for label in SIZES
    )
    note = (
        f"\nMedian of {args.rounds} rounds x {args.requests} requests per size, in process,"
        f" pinned to CPU {b.SERVER_CPU}; baseline {args.baseline} and this tree in turns."
        f" CPU us per round, before/now: {rounds}."
    )
    return b.machine_line() + "\n\n" + b.table(headers, rows) + note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="main", help="git revision to compare with")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--names", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(Path(args.worker), json.loads(args.names), args.requests)
        return
    from gitreg.storage.blobs import FileBlobStore

    with b.workspace("blob-inprocess") as ws:
        data = ws / "data"
        store = FileBlobStore(data / "blobs")
        rng = random.Random(16)
        names = {label: store.put_bytes(rng.randbytes(n)).sha256 for label, n in SIZES.items()}
        trees = {"before": b.baseline_tree(ws, args.baseline), "after": b.ROOT}
        runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        for round_ in range(args.rounds):
            b.progress(f"round {round_ + 1} of {args.rounds}")
            for name, tree in trees.items():
                runs[name].append(_in_worker(tree, data, names, args.requests))
        print(_report(args, runs))


if __name__ == "__main__":
    main()

"""Memory of one gitreg worker (`gitreg serve`, one worker) through its life.

Reads VmRSS (now) and VmHWM (peak so far) from /proc/PID/status:

1. idle, 3 s after start;
2. after `gitreg repo add` published a module with 200 tags (run by the CLI, as operators
   do; the server notices through SQLite's data_version) and the versions list was served;
3. after a metadata load: discovery, versions and all 200 downloads, round robin;
4. after lookups of made-up module names (each a cache miss, cached as "not found": the
   cache is bounded at 50,000 entries).

Run twice, each time with a fresh server and data dir: as is, and with
MALLOC_ARENA_MAX=2 (glibc otherwise gives each thread that allocates its own malloc arena;
gitreg serve runs job threads and a thread pool). Target: < 60 MiB. A second table shows
what each import costs in a fresh interpreter.

    python bench/rss.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import benchlib as b

MODULE = "acme/rss/aws"
TAGS = 200
TARGET_MIB = 60

UNKNOWN_LUA = """
math.randomseed(42)
request = function()
  return wrk.format(nil, "/v1/modules/u" .. math.random(1, 1000000000) .. "/x/aws/versions")
end
"""

# What `gitreg serve` cannot do without (HTTP, TLS, SQLite), then each heavier dependency
# on top of it, one at a time, then everything `gitreg serve` imports.
BASE = "import asyncio, json, ssl, sqlite3, starlette.applications, uvicorn"
IMPORTS = {
    "sqlite_utils (index helpers; pulls click, dateutil, pluggy, tabulate)": "import sqlite_utils",
    "cryptography.x509 (local CA)": "import cryptography.x509",
    "pysequoia (provider signing)": "import pysequoia",
    "httpx (mirror, forges)": "import httpx",
    "dulwich.client + dulwich.repo": "import dulwich.client, dulwich.repo",
    "all of gitreg serve": "import gitreg.app, gitreg.commands.serve",
}


def vm(server: b.Server) -> tuple[int, int]:
    found = b.proc_status(server.pid)
    return found["VmRSS"], found["VmHWM"]


def import_rss(code: str) -> float:
    script = (
        f"{code}\nimport gc; gc.collect()\n"
        "print([l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1])"
    )
    out = subprocess.run(
        [b.PYTHON, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return int(out.stdout.strip()) / 1024


CONFIGS = {"default": {}, "MALLOC_ARENA_MAX=2": {"MALLOC_ARENA_MAX": "2"}}


def one_life(
    args: argparse.Namespace, ws: Path, tls: b.Tls, src: b.SyntheticRepo, env: dict[str, str]
) -> list[tuple[str, tuple[int, int], str]]:
    """Start a fresh server on a fresh data dir and read its memory at each stage."""
    data = ws / f"data-{len(list(ws.glob('data-*')))}"
    stages: list[tuple[str, tuple[int, int], str]] = []
    with b.servers() as started:
        server = b.start_gitreg(data, tls, ws, env=env)
        started.append(server)
        time.sleep(3)
        stages.append(("idle after start", vm(server), ""))

        added = b.gitreg_cli(data, "repo", "add", str(src.path), "--module", MODULE)
        versions_path = f"/v1/modules/{MODULE}/versions"
        deadline = time.monotonic() + 30
        listed = 0
        while time.monotonic() < deadline:
            status, _, body = b.fetch(server.url(versions_path), tls.ca)
            listed = len(json.loads(body)["modules"][0]["versions"]) if status == 200 else 0
            if listed == TAGS:
                break
            time.sleep(0.1)
        b.require(listed == TAGS, f"server lists {listed} of {TAGS} versions")
        note = f"`repo add` CLI: {added.seconds:.1f} s, its own peak {b.mib(added.maxrss_kib)} MiB"
        stages.append((f"after publishing {TAGS} tags", vm(server), note))

        paths = ["/.well-known/terraform.json", versions_path]
        paths += [f"/v1/modules/{MODULE}/{t.lstrip('v')}/download" for t in src.tags]
        load = b.wrk(
            server.url("/"),
            seconds=args.seconds,
            connections=16,
            lua=b.lua_paths(paths),
            server=server,
        )
        b.require(load.errors == 0 and load.non2xx == 0, "metadata load answered")
        note = f"{load.requests:,} requests over {len(paths)} URLs, {load.rps:,.0f} req/s"
        stages.append(("after metadata load", vm(server), note))

        unknown = b.wrk(
            server.url("/"), seconds=args.seconds, connections=16, lua=UNKNOWN_LUA, server=server
        )
        b.require(unknown.errors == 0, "unknown-module load answered")
        note = f"{unknown.requests:,} made-up names (404s, each cached), {unknown.rps:,.0f} req/s"
        stages.append(("after unknown-module lookups", vm(server), note))
    return stages


def run(args: argparse.Namespace, ws: Path) -> str:
    tls = b.make_tls(ws / "tls")
    src = b.synthetic_repo(ws / "module.git", files=12, tags=TAGS, small=True)
    lives = {name: one_life(args, ws, tls, src, env) for name, env in CONFIGS.items()}
    rows: list[list[object]] = []
    first = next(iter(lives.values()))
    limit = TARGET_MIB * 1024
    for n, (stage, _, note) in enumerate(first):
        row: list[object] = [stage]
        for stages in lives.values():
            rss, hwm = stages[n][1]
            row += [f"{b.mib(rss)} / {b.mib(hwm)}", "yes" if hwm < limit else "NO"]
        rows.append([*row, note])
    headers = ["stage"]
    for name in lives:
        headers += [f"{name}: RSS / HWM MiB", f"< {TARGET_MIB}"]
    headers.append("note (default run)")
    base = import_rss(BASE)
    imports = [
        ["python -c pass", f"{import_rss(''):.1f}", ""],
        ["base: " + BASE[7:], f"{base:.1f}", ""],
    ]
    for label, code in IMPORTS.items():
        total = import_rss(f"{BASE}\n{code}")
        imports.append([f"base + {label}", f"{total:.1f}", f"+{total - base:.1f}"])
    return "\n".join(
        [
            "## RSS of one gitreg worker",
            "",
            f"Machine: {b.machine_line()}",
            "",
            f"`gitreg serve` (one worker, TLS, log level info); wrk -t1 -c16 -d{args.seconds}s"
            f" per load. Target: VmHWM < {TARGET_MIB} MiB.",
            "",
            b.table(headers, rows),
            "",
            "RSS of a fresh interpreter after imports (MiB, after gc.collect()); each line is"
            " the base plus one dependency, so the last column is what that dependency adds:",
            "",
            b.table(["imports", "VmRSS MiB", "over base"], imports),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    with b.workspace("rss", args.keep) as ws:
        print(run(args, ws))


if __name__ == "__main__":
    main()

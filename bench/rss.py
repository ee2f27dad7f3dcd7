"""Memory of one worker: gitreg vs bare Starlette, in one run.

Reads VmRSS (now) and VmHWM (peak so far) from /proc/PID/status of:

- `gitreg serve` (one worker, TLS, as installed) on a data dir holding a published
  50-version module and a 20 MB blob, and bench/bare_server.py (Starlette on uvicorn
  with httptools + uvloop) answering gitreg's very bytes from memory and the same file
  with `FileResponse`, through the same stages: idle (3 s after start); after a
  32-connection metadata load over HTTPS (discovery, versions and every download,
  round robin); after 8 concurrent downloads of the 20 MB archive over HTTPS; and, for
  gitreg, after lookups of made-up module names (each a cache miss, cached as "not
  found");
- `gitreg serve` on an index of 10,000 modules x 50 versions and 1,000 providers
  (bench/index_gen.py, `--reconcile-interval 0`: its repositories do not exist): idle,
  and after a 32-connection load spread over every module's versions and downloads.

Target: VmHWM <= 60 MiB at every stage. A second table shows what each import costs
in a fresh interpreter.

    python bench/rss.py [--seconds 10] [--modules 10000]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import time
from pathlib import Path

import benchlib as b
import metadata

MODULE = "acme/rss/aws"
TAGS = 50
TARGET_MIB = 60
ARCHIVE_BYTES = 20_000_000

UNKNOWN_LUA = """
math.randomseed(42)
request = function()
  return wrk.format(nil, "/v1/modules/u" .. math.random(1, 1000000000) .. "/x/aws/versions")
end
"""

# What `gitreg serve` cannot do without (HTTP, TLS, SQLite), then each heavier dependency
# on top of it, one at a time, then everything `gitreg serve` imports.
BASE = (
    "import asyncio, json, ssl, sqlite3, starlette.applications, uvicorn,"
    " uvicorn.protocols.http.httptools_impl, uvloop"
)
IMPORTS = {
    "cryptography.x509 (local CA; made in a child process)": "import cryptography.x509",
    "pysequoia (provider signing; imported where used)": "import pysequoia",
    "httpx (mirror, forges; imported where used)": "import httpx",
    "hcl2 (documentation, mirror config; imported where used)": "import hcl2",
    "dulwich.client + dulwich.repo": "import dulwich.client, dulwich.repo",
    "prometheus_client": "import prometheus_client",
    "the CLI parser and the app, as `gitreg serve` builds them": (
        "import gitreg.cli, gitreg.app; gitreg.cli.build_parser()"
    ),
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


Stage = tuple[str, tuple[int, int], str]


def loads(
    args: argparse.Namespace, server: b.Server, paths: list[str], archive: str
) -> list[Stage]:
    """The metadata load, then the concurrent archive downloads; memory after each."""
    stages: list[Stage] = []
    load = b.wrk(
        server.url("/"), seconds=args.seconds, connections=32, lua=b.lua_paths(paths), server=server
    )
    b.require(load.errors == 0 and load.non2xx == 0, f"{server.name}: metadata load answered")
    note = f"{load.requests:,} requests over {len(paths)} URLs, {load.rps:,.0f} req/s"
    stages.append(("after a 32-connection metadata load (HTTPS)", vm(server), note))
    got = b.wrk(
        server.url(archive), seconds=args.seconds, connections=8, server=server, timeout_s=60
    )
    b.require(got.errors == 0 and got.non2xx == 0 and got.requests > 0, f"{server.name}: archives")
    note = f"{got.requests:,} downloads, {got.mb_per_s:,.0f} MB/s"
    stages.append(("after 8 concurrent 20 MB archive downloads (HTTPS)", vm(server), note))
    return stages


def gitreg_and_bare(args: argparse.Namespace, ws: Path, tls: b.Tls) -> dict[str, list[Stage]]:
    from gitreg.storage.blobs import FileBlobStore

    data = ws / "data"
    src = b.synthetic_repo(ws / "module.git", files=12, tags=TAGS, small=True)
    b.gitreg_cli(data, "repo", "add", str(src.path), "--module", MODULE)
    store = FileBlobStore(data / "blobs")
    stored = store.put_bytes(random.Random(7).randbytes(ARCHIVE_BYTES))
    archive = f"/archives/{stored.sha256}.tar.gz"
    paths = ["/.well-known/terraform.json", f"/v1/modules/{MODULE}/versions"]
    paths += [f"/v1/modules/{MODULE}/{t.lstrip('v')}/download" for t in src.tags]
    lives: dict[str, list[Stage]] = {}
    with b.servers() as started:
        gitreg = b.start_gitreg(data, tls, ws)
        started.append(gitreg)
        answers = metadata.capture(gitreg, {p: p for p in paths}, tls)
        routes = metadata.bare_routes(answers, ws / "routes.json")
        spec = json.loads(routes.read_text())
        spec["files"] = [
            {
                "path": archive,
                "file": str(store.path(stored.sha256)),
                "media_type": "application/gzip",
            }
        ]
        routes.write_text(json.dumps(spec))
        bare = b.start_bare(routes, tls, ws)
        started.append(bare)
        time.sleep(3)
        for server in (gitreg, bare):
            lives[server.name] = [("idle, 3 s after start", vm(server), "")]
            lives[server.name] += loads(args, server, paths, archive)
        unknown = b.wrk(
            gitreg.url("/"), seconds=args.seconds, connections=16, lua=UNKNOWN_LUA, server=gitreg
        )
        b.require(unknown.errors == 0, "unknown-module load answered")
        note = f"{unknown.requests:,} made-up names (404s, each cached)"
        lives["gitreg"].append(("after made-up module names", vm(gitreg), note))
    return lives


def large_index(args: argparse.Namespace, ws: Path, tls: b.Tls) -> list[Stage]:
    if args.modules == 0:  # e.g. for an older gitreg without gitreg/storage/bulk.py
        return []
    import index_gen
    import index_scale

    data = ws / "large"
    made = index_gen.generate(data, args.modules, 50, args.providers)
    stages: list[Stage] = []
    with b.servers() as started:
        server = b.start_gitreg(data, tls, ws, name="gitreg-large", args=index_scale.SERVE_ARGS)
        started.append(server)
        time.sleep(3)
        note = f"{made.modules:,} modules, {made.versions:,} versions, {made.providers:,} providers"
        stages.append(("large index: idle, 3 s after start", vm(server), note))
        load = b.wrk(
            server.url("/"),
            seconds=args.seconds,
            connections=32,
            lua=index_scale.spread_lua(args.modules),
            server=server,
        )
        b.require(load.errors == 0 and load.non2xx == 0, "spread load answered")
        note = f"{load.requests:,} answers, versions and downloads of random modules"
        stages.append(("large index: after a load over every module", vm(server), note))
    return stages


def run(args: argparse.Namespace, ws: Path) -> str:
    tls = b.make_tls(ws / "tls")
    lives = gitreg_and_bare(args, ws, tls)
    large = large_index(args, ws, tls)
    limit = TARGET_MIB * 1024
    rows: list[list[object]] = []
    for n, (stage, (rss, hwm), note) in enumerate(lives["gitreg"]):
        bare = lives["bare"][n][1] if n < len(lives["bare"]) else None
        rows.append(
            [
                stage,
                f"{b.mib(rss)} / {b.mib(hwm)}",
                f"{b.mib(bare[0])} / {b.mib(bare[1])}" if bare else "",
                "yes" if hwm <= limit else "**no**",
                note,
            ]
        )
    for stage, (rss, hwm), note in large:
        rows.append(
            [stage, f"{b.mib(rss)} / {b.mib(hwm)}", "", "yes" if hwm <= limit else "**no**", note]
        )
    headers = ["stage", "gitreg RSS / HWM MiB", "bare RSS / HWM MiB", f"<= {TARGET_MIB}", "note"]
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
            "## RSS of one worker: gitreg vs bare Starlette",
            "",
            f"Machine: {b.machine_line()}",
            "",
            "One worker each, TLS, log level info; wrk -t1, keep-alive,"
            f" {args.seconds} s per load. Target: VmHWM <= {TARGET_MIB} MiB.",
            "",
            b.table(headers, rows),
            "",
            "RSS of a fresh interpreter after imports (MiB, after gc.collect()); each line is"
            " the base plus one thing, so the last column is what it adds:",
            "",
            b.table(["imports", "VmRSS MiB", "over base"], imports),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--modules", type=int, default=10_000, help="0: no large index")
    parser.add_argument("--providers", type=int, default=1_000)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    with b.workspace("rss", args.keep) as ws:
        print(run(args, ws))


if __name__ == "__main__":
    main()

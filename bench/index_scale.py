"""Index scale: gitreg with 10,000 modules x 50 versions and
1,000 providers (bench/index_gen.py), against the same gitreg on an empty index and
bare Starlette (bench/bare_server.py) in the same run:

1. `gitreg serve` start to its first metadata answer (< 2 s);
2. cached metadata p99 at 32 connections (<= 5 ms): one module's versions and
   download, wrk, against bare Starlette answering the same bytes;
3. cold metadata answers (< 10 ms): versions, then download, of 300 modules never
   asked before, one at a time on one kept-alive TLS connection;
4. one worker's RSS with that index (<= 60 MiB): idle, after the cold answers,
   after a load spread over every module;
5. a publish (< 100 ms plus its archive build): one new tag of a small module
   synced in process (`SyncService.sync_repo`), its archive build timed apart;
6. the query plans of the metadata and publish paths (EXPLAIN on SQLite, and on
   PostgreSQL when tests/support/postgres.py can start one).

The generated repositories do not exist, so the servers run with
`--reconcile-interval 0` (the periodic reconcile would list 10,000 unreachable
remotes); everything else is as installed (TLS, one worker, log level info).

    python bench/index_scale.py [--modules 10000] [--seconds 5] [--no-postgres]
"""

from __future__ import annotations

import argparse
import http.client
import random
import ssl
import sys
import time
from pathlib import Path

import benchlib as b
import index_gen
import index_scale_parts as parts

SERVE_ARGS = ("--reconcile-interval", "0")
COLD = 300


def start(data: Path, tls: b.Tls, ws: Path, name: str) -> tuple[b.Server, float, float]:
    """A server, the seconds to its first /healthz and to its first versions answer."""
    begin = time.perf_counter()
    server = b.start_gitreg(data, tls, ws, name=name, args=SERVE_ARGS)
    ready = time.perf_counter() - begin
    namespace, module, system = index_gen.module_address(1)
    status, _, _ = b.fetch(
        server.url(f"/v1/modules/{namespace}/{module}/{system}/versions"), tls.ca
    )
    first = time.perf_counter() - begin
    return server, ready, first if status in (200, 404) else float("nan")


def cold_answers(server: b.Server, tls: b.Tls, modules: int, seed: int) -> dict[str, list[float]]:
    """Seconds per answer for modules not asked before, on one kept-alive connection."""
    context = ssl.create_default_context(cafile=str(tls.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=30)
    conn.request("GET", "/.well-known/terraform.json")
    conn.getresponse().read()
    picks = random.Random(seed).sample(range(modules), min(COLD, modules))
    times: dict[str, list[float]] = {"versions": [], "download": []}
    for kind, path in (("versions", "versions"), ("download", "1.2.3/download")):
        for i in picks:
            namespace, module, system = index_gen.module_address(i)
            begin = time.perf_counter()
            conn.request("GET", f"/v1/modules/{namespace}/{module}/{system}/{path}")
            answer = conn.getresponse()
            answer.read()
            times[kind].append(time.perf_counter() - begin)
            b.require(answer.status in (200, 204), f"{kind} of {module}: {answer.status}")
        picks = random.Random(seed + 1).sample(range(modules), min(COLD, modules))
    conn.close()
    return times


def spread_lua(modules: int) -> str:
    return f"""
math.randomseed(7)
local systems = {{"aws", "azurerm", "google"}}
request = function()
  local i = math.random(0, {modules - 1})
  local base = "/v1/modules/ns" .. (i % 200) .. "/m" .. i .. "/" .. systems[(i % 3) + 1]
  if math.random() < 0.5 then return wrk.format(nil, base .. "/versions") end
  return wrk.format(nil, base .. "/1.2.3/download")
end
"""


def rss(server: b.Server) -> str:
    found = b.proc_status(server.pid)
    return f"{b.mib(found['VmRSS'])} / {b.mib(found['VmHWM'])}"


def run(args: argparse.Namespace, ws: Path) -> str:
    tls = b.make_tls(ws / "tls")
    big, empty = ws / "big", ws / "empty"
    made = index_gen.generate(big, args.modules, 50, args.providers)
    b.progress(f"generated in {made.seconds:.1f} s")
    src = b.synthetic_repo(ws / "small.git", files=12, tags=3, small=True)
    for data in (big, empty):
        b.gitreg_cli(data, "repo", "add", str(src.path), "--module", "acme/small/aws")
    out = [
        "## Index scale: gitreg with a large index vs an empty one vs bare Starlette",
        "",
        f"Machine: {b.machine_line()}",
        "",
        f"Index: {made.modules:,} modules, {made.versions:,} module versions,"
        f" {made.providers:,} providers with {made.provider_versions:,} versions x 4 platforms;"
        f" generated in {made.seconds:.1f} s (SQLite file {made.db_bytes / 2**20:.0f} MiB)."
        " Servers: TLS, one worker, log level info, `--reconcile-interval 0`.",
        "",
    ]
    out += parts.publish_table(ws, src, big, empty)
    out += parts.startup_table(args, ws, tls, big, empty, start)
    out += serve_tables(args, ws, tls, big, empty)
    out += parts.explain_tables(ws, big, args)
    return "\n".join(out)


def serve_tables(
    args: argparse.Namespace, ws: Path, tls: b.Tls, big: Path, empty: Path
) -> list[str]:
    """Cold answers, RSS and cached p99, gitreg on both indexes and bare Starlette."""
    namespace, module, system = index_gen.module_address(5)
    hot = [
        f"/v1/modules/{namespace}/{module}/{system}/versions",
        f"/v1/modules/{namespace}/{module}/{system}/1.2.3/download",
    ]
    rows: dict[str, dict[str, str]] = {}
    with b.servers() as started:
        gitreg, _, _ = start(big, tls, ws, "gitreg-big")
        started.append(gitreg)
        time.sleep(2)
        rows["idle RSS / HWM MiB"] = {"big": rss(gitreg)}
        cold = cold_answers(gitreg, tls, args.modules, seed=11)
        rows["after the cold answers"] = {"big": rss(gitreg)}
        spread = b.wrk(
            gitreg.url("/"),
            seconds=args.seconds,
            connections=32,
            lua=spread_lua(args.modules),
            server=gitreg,
        )
        b.require(spread.errors == 0 and spread.non2xx == 0, "spread load answered")
        rows[f"after {spread.requests:,} answers spread over every module"] = {"big": rss(gitreg)}
        bare = parts.start_bare_like(gitreg, hot, tls, ws)
        started.append(bare)
        rows["idle RSS / HWM MiB"]["bare"] = rss(bare)
        floor = {
            "versions": parts.client_latency(bare, tls, hot[0], COLD),
            "download": parts.client_latency(bare, tls, hot[1], COLD),
        }
        hot_loads = parts.hot_loads(args, [gitreg, bare], hot)
    return parts.render_serving(rows, cold, hot_loads, floor, args.modules)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=10_000)
    parser.add_argument("--providers", type=int, default=1_000)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    with b.workspace("index-scale", args.keep) as ws:
        print(run(args, ws))


if __name__ == "__main__" and sys.argv[1:2] == ["--publish-probe"]:
    parts.publish_probe(Path(sys.argv[2]), sys.argv[3])
elif __name__ == "__main__":
    main()

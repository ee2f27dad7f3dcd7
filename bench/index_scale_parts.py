"""Parts of bench/index_scale.py: start-up, hot load, publish and query-plan tables."""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import os
import sqlite3
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import benchlib as b
import index_gen
import metadata

sys.path.insert(0, str(b.ROOT))  # tests.support: the PostgreSQL server

STARTS = 3

Start = Callable[[Path, b.Tls, Path, str], tuple[b.Server, float, float]]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def startup_table(
    args: argparse.Namespace, ws: Path, tls: b.Tls, big: Path, empty: Path, start: Start
) -> list[str]:
    found: dict[str, list[tuple[float, float]]] = {"big": [], "empty": []}
    for _ in range(STARTS):
        for name, data in (("big", big), ("empty", empty)):
            with b.servers() as started:
                server, up, answered = start(data, tls, ws, f"start-{name}")
                started.append(server)
                found[name].append((up, answered))
    rows = []
    for name, runs in found.items():
        ready = sorted(r for r, _ in runs)
        first = sorted(f for _, f in runs)
        rows.append(
            [
                f"{args.modules:,} modules" if name == "big" else "empty index",
                f"{b.median(ready):.2f} ({ready[0]:.2f}-{ready[-1]:.2f})",
                f"{b.median(first):.2f} ({first[0]:.2f}-{first[-1]:.2f})",
                "yes" if max(first) < 2 else "**no**",
            ]
        )
    head = ["index", "start to /healthz s", "start to first versions answer s", "< 2 s"]
    return [
        "### Start-up",
        "",
        f"`gitreg serve` spawned to its first answers (median of {STARTS}, range), the large"
        " and the empty index alternating; the first versions answer is a cache miss.",
        "",
        b.table(head, rows),
        "",
    ]


def start_bare_like(gitreg: b.Server, paths: Sequence[str], tls: b.Tls, ws: Path) -> b.Server:
    """Bare Starlette answering gitreg's very bytes and headers for `paths`."""
    answers = metadata.capture(gitreg, {p: p for p in paths}, tls)
    return b.start_bare(metadata.bare_routes(answers, ws / "routes-scale.json"), tls, ws)


def hot_loads(
    args: argparse.Namespace, servers: Sequence[b.Server], paths: Sequence[str]
) -> dict[tuple[str, str], b.Load]:
    """Median-by-req/s wrk run per server and path, 32 connections."""
    runs: dict[tuple[str, str], list[b.Load]] = {}
    for server in servers:
        for path in paths:
            b.wrk(server.url(path), seconds=1, connections=32)
    for _ in range(args.rounds):
        for path in paths:
            for server in servers:
                load = b.measure(server, path, seconds=args.seconds, connections=32)
                b.require(load.errors == 0 and load.non2xx == 0, f"{server.name} {path}")
                runs.setdefault((server.name, path), []).append(load)
    return {k: sorted(v, key=lambda x: x.rps)[len(v) // 2] for k, v in runs.items()}


def client_latency(server: b.Server, tls: b.Tls, path: str, count: int) -> list[float]:
    context = ssl.create_default_context(cafile=str(tls.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=30)
    times = []
    for _ in range(count + 1):
        begin = time.perf_counter()
        conn.request("GET", path)
        conn.getresponse().read()
        times.append(time.perf_counter() - begin)
    conn.close()
    return times[1:]  # the first pays the handshake


def render_serving(
    rows: dict[str, dict[str, str]],
    cold: dict[str, list[float]],
    hot: dict[tuple[str, str], b.Load],
    floor: dict[str, list[float]],
    modules: int,
) -> list[str]:
    cold_rows = []
    for kind, times in cold.items():
        base = floor[kind]
        cold_rows.append(
            [
                kind,
                len(times),
                _ms(_pct(times, 0.5)),
                _ms(_pct(times, 0.99)),
                _ms(max(times)),
                f"{_ms(_pct(base, 0.5))} / {_ms(_pct(base, 0.99))}",
                "yes" if _pct(times, 0.99) < 0.010 else "**no**",
            ]
        )
    hot_rows = []
    for path in sorted({p for _, p in hot}):
        mine, bare = hot[("gitreg-big", path)], hot[("bare", path)]
        hot_rows.append(
            [
                path.rsplit("/", 1)[-1],
                f"{mine.rps:,.0f}",
                f"{bare.rps:,.0f}",
                f"{mine.rps / bare.rps:.2f}",
                f"{mine.p50_ms:.2f} / {mine.p99_ms:.2f}",
                f"{bare.p50_ms:.2f} / {bare.p99_ms:.2f}",
                "yes" if mine.p99_ms <= 5 else "**no**",
            ]
        )
    rss_rows = [[stage, v.get("big", ""), v.get("bare", "")] for stage, v in rows.items()]
    return [
        "### Cold answers",
        "",
        f"Versions, then download, of {len(cold['versions'])} modules of {modules:,} never asked"
        " before (each a cache miss: lookup in the index, access check, JSON), one at a time"
        " on one kept-alive TLS connection, ms. Baseline: bare Starlette answering the same"
        " kind of request from memory, same client.",
        "",
        b.table(["answer", "n", "p50", "p99", "max", "bare p50 / p99", "p99 < 10 ms"], cold_rows),
        "",
        "### Cached answers at 32 connections",
        "",
        b.table(
            [
                "endpoint",
                "gitreg req/s",
                "bare req/s",
                "gitreg/bare",
                "gitreg p50/p99 ms",
                "bare p50/p99 ms",
                "p99 <= 5 ms",
            ],
            hot_rows,
        ),
        "",
        b.contention_note(list(hot.values())),
        "",
        "### RSS of the worker serving the large index",
        "",
        b.table(["stage", "gitreg RSS / HWM MiB", "bare Starlette RSS / HWM MiB"], rss_rows),
        "",
    ]


def publish_probe(data_dir: Path, repo_url: str) -> None:
    """In a fresh process: warm up as a serving process is, say "ready", wait for a
    line on stdin (the new tag exists), sync the repository, timing its archive builds."""
    os.environ["GITREG_RECONCILE_INTERVAL"] = "0"
    from gitreg.catalog import hcl, readme
    from gitreg.services import build_services
    from gitreg.settings import load_settings

    svc = build_services(load_settings({"data_dir": data_dir}))
    repo = svc.index.repo_by_url(repo_url)
    # A serving process has done this long before: import the documentation
    # parsers, build python-hcl2's grammar (once per process), open
    # the mirror (a sync with nothing new).
    hcl.parse_file('variable "warm" {}')
    readme.render("# warm")
    svc.sync.sync_repo(repo, "sync")
    archive = [0.0]
    builds = svc.publisher.builds
    build_many = builds.build_many

    def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
        # The builds of a sync, each archive's storing between them included.
        begin = time.perf_counter()
        try:
            yield from build_many(*args, **kwargs)
        finally:
            archive[0] += time.perf_counter() - begin

    setattr(builds, "build_many", timed)  # noqa: B010 (a measurement wrapper)
    print("ready", flush=True)
    sys.stdin.readline()
    begin = time.perf_counter()
    result = svc.sync.sync_repo(repo, "sync")
    total = time.perf_counter() - begin
    svc.close()
    found = {
        "total": total,
        "archive": archive[0],
        "published": result.published,
    }
    print(json.dumps(found), flush=True)


def _probe(data: Path, src: b.SyntheticRepo) -> subprocess.Popen[str]:
    script = str(Path(__file__).with_name("index_scale.py"))
    command = [b.PYTHON, script, "--publish-probe", str(data), str(src.path)]
    probe = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert probe.stdout is not None
    b.require(probe.stdout.readline().strip() == "ready", "publish probe started")
    return probe


def _probe_result(probe: subprocess.Popen[str]) -> dict[str, object]:
    assert probe.stdin is not None and probe.stdout is not None
    probe.stdin.write("go\n")
    probe.stdin.flush()
    found: dict[str, object] = json.loads(probe.stdout.readline())
    probe.wait(timeout=60)
    b.require(len(list(found["published"])) == 1, f"one version published: {found}")  # type: ignore[call-overload]
    return found


def publish_table(ws: Path, src: b.SyntheticRepo, big: Path, empty: Path) -> list[str]:
    runs: dict[str, list[dict[str, object]]] = {"big": [], "empty": []}
    for k in range(STARTS):
        probes = {"big": _probe(big, src), "empty": _probe(empty, src)}
        b.tag(src.path, f"v2.0.{k}", src.add_commit())
        for name, probe in probes.items():
            runs[name].append(_probe_result(probe))
    rows = []
    for name, found in runs.items():
        total = b.median([float(str(f["total"])) for f in found])
        archive = [f["archive"] for f in found]
        build = b.median([float(str(a)) for a in archive]) if None not in archive else float("nan")
        rows.append(
            [
                "large index" if name == "big" else "empty index",
                _ms(total),
                _ms(build),
                _ms(total - build),
                "yes" if total - build < 0.1 else "**no**",
            ]
        )
    head = [
        "index",
        "sync of one new tag ms",
        "of which archive build ms",
        "the rest ms",
        "rest < 100 ms",
    ]
    return [
        "### Publishing one new tag",
        "",
        "A 12-file module registered in both indexes gets a new tag; a process warmed as a"
        " serving one is (documentation parsers loaded, the mirror opened by a sync with"
        " nothing new) syncs it in process (`SyncService.sync_repo`: fetch, tag listing,"
        f" archive, documentation, index write), median of {STARTS} tags.",
        "",
        b.table(head, rows),
        "",
    ]


QUERIES = {
    "find_module": "SELECT * FROM modules WHERE address_key = 'ns5/m5/google'",
    "versions": "SELECT * FROM module_versions WHERE module_id = 5 ORDER BY id",
    "version_by_key": "SELECT * FROM module_versions WHERE module_id = 5 AND version_key = '1.2.3'",
    "modules_of_repo": "SELECT * FROM modules WHERE repo_id = 5 ORDER BY id",
    "find_provider": "SELECT * FROM providers WHERE address_key = 'pns3/p3'",
    "provider_version": (
        "SELECT * FROM provider_versions WHERE provider_id = 3 AND version = '0.1.0'"
    ),
    "packages": "SELECT * FROM provider_packages WHERE version_id = 30 ORDER BY os, arch",
    "access signature (versions)": "SELECT coalesce(max(id), 0) FROM module_versions",
    "before: count of versions": "SELECT count(*) FROM module_versions",
}


def _fetch(conn: Any, sql: str) -> object:
    return conn.execute(sql).fetchall()


def _timed(run: Callable[[], object]) -> float:
    run()
    begin = time.perf_counter()
    for _ in range(5):
        run()
    return (time.perf_counter() - begin) / 5


def explain_tables(ws: Path, big: Path, args: argparse.Namespace) -> list[str]:
    db = sqlite3.connect(big / "index.sqlite3")
    rows = []
    for name, sql in QUERIES.items():
        plan = "; ".join(r[3] for r in db.execute("EXPLAIN QUERY PLAN " + sql))
        rows.append([name, plan, _ms(_timed(functools.partial(_fetch, db, sql)))])
    db.close()
    out = ["### Query plans", "", "SQLite:", "", b.table(["query", "plan", "ms"], rows), ""]
    if not args.no_postgres:
        out += _postgres_plans(ws, args)
    return out


def _postgres_plans(ws: Path, args: argparse.Namespace) -> list[str]:
    import psycopg

    from tests.support.postgres import start_postgres

    root = Path(tempfile.mkdtemp(prefix="pg-", dir=ws))
    root.chmod(0o755)  # the server runs as its own account
    server = start_postgres(root)
    try:
        url = server.create_database().url
        index_gen.generate(root / "data", args.modules, 50, args.providers, database_url=url)
        rows = []
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")
            for name, sql in QUERIES.items():
                lines = [str(r[0]) for r in conn.execute("EXPLAIN (COSTS OFF) " + sql)]
                plan = "; ".join(x.strip() for x in lines if "Scan" in x) or lines[0]
                rows.append([name, plan, _ms(_timed(functools.partial(_fetch, conn, sql)))])
    finally:
        server.close()
    return ["PostgreSQL:", "", b.table(["query", "plan", "ms"], rows), ""]

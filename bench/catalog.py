"""Issue 13's two budgets: search over 10,000 modules, and what extraction adds to publish.

1. Search: 10,000 modules' search rows (namespace, name, system, a description and a
   README's worth of words, input/output names) in a fresh SQLite index, then
   `CatalogIndex.search` timed over `--queries` queries (one-word names, two-word
   phrases, prefixes, words matching thousands of rows): p50/p99/max. With
   `--postgres URL` the same on PostgreSQL.
2. Publish: a module repository with a 6 kB README, 12 `.tf` files (60 inputs, 20
   outputs), 2 submodules, 2 examples and 300 other files, `--tags` tags. The whole
   `sync_repo` is timed with and without documentation (fresh data dir each run,
   median of `--runs`), wall and CPU (this process and archive workers). With
   `--baseline DIR` (a checkout of the code before a change) both codes are
   measured in processes of their own, taking turns: the "before" and "after" rows.

    python bench/catalog.py [--modules 10000] [--queries 2000] [--tags 40] [--runs 3]
    python bench/catalog.py --publish-only --baseline ../main [--runs 5] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib as b

from gitreg.api.browse import SEARCH_CANDIDATES

WORDS = (
    "vpc",
    "network",
    "subnet",
    "cluster",
    "kubernetes",
    "eks",
    "gke",
    "bucket",
    "storage",
    "queue",
    "topic",
    "dns",
    "zone",
    "record",
    "certificate",
    "gateway",
    "endpoint",
    "database",
    "postgres",
    "redis",
    "cache",
    "lambda",
    "function",
    "role",
    "policy",
    "iam",
    "secret",
    "vault",
    "monitor",
    "alarm",
    "logging",
    "metrics",
    "backup",
    "firewall",
    "route",
)


def fill_search(catalog: Any, index: Any, count: int, rng: random.Random) -> None:
    from gitreg.storage.catalog import SearchEntry

    repo = index.add_repo("https://git.example.com/bench/all.git", "")
    for i in range(count):
        ns, name = f"team{i % 50}", f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{i}"
        system = rng.choice(("aws", "google", "azurerm", "kubernetes"))
        module = index.add_module(repo.id, ns, name, system, "", "")
        body = " ".join(rng.choice(WORDS) for _ in range(400))
        names = " ".join(f"{rng.choice(WORDS)}_{rng.choice(WORDS)}" for _ in range(30))
        description = " ".join(rng.choice(WORDS) for _ in range(12))
        catalog.put_search(SearchEntry(module.id, ns, name, system, description, f"{body} {names}"))


def before_search(catalog: Any, query: str, limit: int) -> list[tuple[int, str]]:
    """The SQLite search before migration 0016, for a baseline in the same run:
    one FTS5 query ranked by bm25 over every column, README text included."""
    words = [w.lower() for w in re.findall(r"[^\W_]+", query)][:16]
    match = " ".join('"' + w + '"*' for w in words)
    rows = catalog._rows(
        "SELECT rowid, namespace FROM module_search_fts WHERE module_search_fts MATCH ?"
        " ORDER BY rank LIMIT ?",
        (match, limit),
    )
    return [(int(r[0]), str(r[1])) for r in rows]


def time_search(
    catalog: Any, queries: int, rng: random.Random, before: bool = False
) -> dict[str, float]:
    asked = []
    for i in range(queries):
        kind = i % 4
        if kind == 0:
            asked.append(rng.choice(WORDS))  # matches thousands: ranking cost dominates
        elif kind == 1:
            asked.append(f"{rng.choice(WORDS)} {rng.choice(WORDS)}")
        elif kind == 2:
            asked.append(rng.choice(WORDS)[:3])  # prefix
        else:
            asked.append(f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{rng.randrange(10000)}")
    times, cpu = [], []
    search = (lambda q, n: before_search(catalog, q, n)) if before else catalog.search
    for query in asked:
        start, start_cpu = time.perf_counter(), time.thread_time()
        search(query, SEARCH_CANDIDATES)
        times.append((time.perf_counter() - start) * 1000)
        # CPU time of this thread: what a shared machine disturbs least.
        cpu.append((time.thread_time() - start_cpu) * 1000)
    times.sort()
    cpu.sort()
    return {
        "p50": statistics.median(times),
        "p99": times[int(len(times) * 0.99) - 1],
        "max": times[-1],
        "cpu p50": statistics.median(cpu),
        "cpu p99": cpu[int(len(cpu) * 0.99) - 1],
    }


def search_bench(args: argparse.Namespace) -> list[list[object]]:
    from gitreg.storage.catalog import CatalogStore
    from gitreg.storage.index import open_index

    rows: list[list[object]] = []
    targets = [("sqlite", "")] + ([("postgresql", args.postgres)] if args.postgres else [])
    for engine, url in targets:
        with tempfile.TemporaryDirectory(prefix="gitreg-bench-") as tmp:
            index = open_index(url, Path(tmp) / "index.sqlite3")
            catalog = CatalogStore(index)
            b.progress(f"filling {args.modules} search rows ({engine})")
            fill_search(catalog, index, args.modules, random.Random(1))
            variants = [("before", True), ("after", False)] if engine == "sqlite" else []
            for label, before in variants or [("after", False)]:
                b.progress(f"timing {args.queries} searches ({engine}, {label})")
                result = time_search(catalog, args.queries, random.Random(2), before)
                rows.append(
                    [f"{engine} {label}", args.modules, args.queries]
                    + [f"{result[k]:.2f}" for k in ("p50", "p99", "max", "cpu p50", "cpu p99")]
                )
            index.close()
    return rows


def module_repo(root: Path, tags: int) -> Path:
    from tests.support.gitrepo import GitRepo

    rng = random.Random(3)
    repo = GitRepo(root / "module")
    readme = "# Module\n\n" + "\n\n".join(
        " ".join(rng.choice(WORDS) for _ in range(60)) for _ in range(12)
    )
    repo.write("README.md", readme + "\n\n[example](examples/basic/main.tf)\n")
    for f in range(12):
        text = "".join(
            f'variable "v{f}_{i}" {{\n  type = map(string)\n  description = "{rng.choice(WORDS)}"\n'
            f"  default = {{}}\n}}\n"
            for i in range(5)
        )
        text += "".join(f'output "o{f}_{i}" {{ value = var.v{f}_{i} }}\n' for i in range(2))
        text += f'resource "null_resource" "r{f}" {{}}\n'
        repo.write(f"file{f}.tf", text)
    for kind in ("modules", "examples"):
        for name in ("one", "two"):
            repo.write(f"{kind}/{name}/main.tf", 'variable "x" {}\noutput "y" { value = 1 }\n')
            repo.write(f"{kind}/{name}/README.md", f"# {name}\n")
    for i in range(300):
        repo.write(f"files/dir{i % 10}/f{i}.txt", "x" * rng.randrange(200, 3000))
    for t in range(tags):
        repo.write("version.txt", str(t))
        repo.commit(f"release {t}")
        repo.tag(f"v1.{t}.0")
    return repo.path


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def publish_once(source: Path, data: Path, with_docs: bool) -> tuple[float, float]:
    """(wall, CPU) seconds of one `sync_repo` of every tag into a fresh data dir."""
    from gitreg.catalog import hcl, readme, tree
    from gitreg.git.backend import DulwichBackend
    from gitreg.modules.publisher import Publisher
    from gitreg.services import build_services
    from gitreg.settings import load_settings

    hcl._parse_cached.cache_clear()  # each run as a fresh process would: nothing parsed yet
    if hasattr(readme, "_render_cached"):  # absent before it existed (a "before" run)
        readme._render_cached.cache_clear()
    if hasattr(tree, "_TEXTS"):  # the blob cache, likewise
        tree._TEXTS.clear()
    if hasattr(tree, "_TREES"):  # and the tree cache
        tree._TREES.clear()
    # Archives built in this process, as a quiet machine does for 40 small ones: on a
    # busy one the first build is slow, so the builder would start worker processes
    # in some runs and not others (gitreg/modules/builds.py), with or without docs.
    settings = load_settings({"data_dir": data, "archive_workers": 1}, environ={})
    svc = build_services(settings)
    record = svc.index.add_repo(str(source), "")
    svc.index.add_module(record.id, "acme", "bench", "aws", "", "")
    publisher = (
        svc.publisher
        if with_docs
        else Publisher(svc.settings, svc.index, svc.blobs, DulwichBackend())
    )
    start, start_cpu = time.perf_counter(), time.process_time() + _children_cpu()
    publisher.sync_repo(svc.index.repo(record.id))
    elapsed = time.perf_counter() - start
    # Archive worker processes included, when the builder starts them (builds.py).
    cpu = time.process_time() + _children_cpu() - start_cpu
    svc.close()
    return elapsed, cpu


def publish_results(args: argparse.Namespace) -> dict[bool, list[tuple[float, float]]]:
    """(wall, CPU) of each run, without docs (False) and with (True)."""
    with tempfile.TemporaryDirectory(prefix="gitreg-bench-") as tmp:
        root = Path(tmp)
        b.progress(f"making a module repository with {args.tags} tags")
        source = module_repo(root, args.tags)
        from gitreg.catalog.hcl import parse_file

        parse_file('variable "warm" {}')  # python-hcl2 builds its grammar once per process
        results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for run in range(args.runs):
            for with_docs in (False, True):
                b.wait_quiet()
                data = root / f"data-{run}-{with_docs}"
                results[with_docs].append(publish_once(source, data, with_docs))
        return results


def publish_row(
    label: str, tags: int, results: dict[bool, list[tuple[float, float]]]
) -> list[object]:
    row: list[object] = [label, tags]
    for part in (0, 1):  # wall, then CPU: a shared machine disturbs CPU time least
        without = b.median([r[part] for r in results[False]])
        with_ = b.median([r[part] for r in results[True]])
        row += [f"{without:.3f}", f"{with_:.3f}", f"{(with_ / without - 1) * 100:+.1f}%"]
    return row


def publish_bench(args: argparse.Namespace) -> list[list[object]]:
    """With `--baseline DIR`, the same measurement of the gitreg in DIR (another
    checkout: the code before a change) and of this one, each in processes of
    their own, taking turns `--rounds` times so both see the same machine."""
    if not args.baseline:
        return [publish_row("this", args.tags, publish_results(args))]
    pooled: dict[str, dict[bool, list[tuple[float, float]]]] = {}
    for _ in range(args.rounds):
        for label, code in (("before", args.baseline), ("after", str(b.ROOT))):
            b.progress(f"{args.runs} runs of the {label} code ({code})")
            command = [b.PYTHON, __file__, "--publish-only", "--json"]
            command += ["--tags", str(args.tags), "--runs", str(args.runs)]
            env = {**os.environ, "PYTHONPATH": code}
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
            found = json.loads(out.stdout.splitlines()[-1])
            into = pooled.setdefault(label, {False: [], True: []})
            for key, runs in ((False, found["without"]), (True, found["with"])):
                into[key] += [(float(w), float(c)) for w, c in runs]
    return [publish_row(label, args.tags, results) for label, results in pooled.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--tags", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres", default="", help="an empty PostgreSQL database's URL")
    parser.add_argument("--publish-only", action="store_true", help="no search half")
    parser.add_argument("--baseline", default="", help="a checkout to compare the publish with")
    parser.add_argument("--rounds", type=int, default=2, help="turns each, with --baseline")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # for --baseline
    args = parser.parse_args()
    if args.json:
        found = publish_results(args)
        print(json.dumps({"without": found[False], "with": found[True]}))
        return 0
    print(b.machine_line())
    if not args.publish_only:
        headers = ["index", "modules", "queries", "p50 ms", "p99 ms", "max ms"]
        print(b.table([*headers, "cpu p50", "cpu p99"], search_bench(args)))
        print()
    headers = ["code", "tags", "without docs s", "with docs s", "adds", "cpu without s"]
    headers += ["cpu with s", "cpu adds"]
    print(b.table(headers, publish_bench(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

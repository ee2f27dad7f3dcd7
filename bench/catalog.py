"""The catalog's two budgets: search over 10,000 modules, and what extraction adds to publish.

1. Search: 10,000 modules' search rows (namespace, name, system, a description and a
   README's worth of words, input/output names) in a fresh SQLite index, then
   `CatalogIndex.search` timed over `--queries` queries (one-word names, two-word
   phrases, prefixes, words matching thousands of rows): p50/p99/max, each query
   asked of the previous search ("before": SQLite's before migration 0016,
   PostgreSQL's before 0022), of `--baseline DIR`'s (a checkout of main before a
   change; "baseline" rows) and of the current one in turn. With `--postgres URL`
   (or `--postgres start`: a server of its own) the same on PostgreSQL.
2. Publish: a module repository with a 6 kB README, 12 `.tf` files (60 inputs, 20
   outputs), 2 submodules, 2 examples and 300 other files, `--tags` tags. The whole
   `sync_repo` is timed with and without documentation (fresh data dir each run,
   median of `--runs`), wall and CPU (this process and archive workers), and the
   CPU spent inside the documenter itself ("docs cpu": steadier on a shared
   machine than the difference of two syncs, of which it is the cause). With
   `--baseline DIR` (a checkout of the code before a change) both codes are
   measured in processes of their own, taking turns: the "before" and "after" rows.

    python bench/catalog.py [--modules 10000] [--queries 2000] [--tags 40] [--runs 3]
    python bench/catalog.py --search-only --postgres start   # the search target
    python bench/catalog.py --search-only --postgres start --baseline DIR   # and main's, DIR
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import benchlib as b

# The code measured first on the path (tests.support, the git repository and
# PostgreSQL helpers, comes with it): with `--baseline`, each child is told which
# checkout to import. Inserting this checkout's root here regardless, as this
# script did, put it before PYTHONPATH: "before" rows measured the "after" code.
sys.path.insert(0, os.environ.get("GITREG_BENCH_CODE") or str(b.ROOT))

from gitreg.catalog.search_cache import SEARCH_CANDIDATES

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
    from gitreg.catalog.store import SearchEntry

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


def before_postgres_search(catalog: Any, query: str, limit: int) -> list[tuple[int, str]]:
    """`CatalogStore.search` on PostgreSQL before migration 0022, for a baseline in
    the same run: the exact-name query, then the same tiers over the wide
    module_search (its generated head_terms and terms)."""
    words = [w.lower() for w in re.findall(r"[^\W_]+", query)][:16]
    every = " & ".join(w + ":*" for w in words)
    some = " | ".join(w + ":*" for w in words)
    exact = catalog._rows(
        "SELECT module_id, namespace FROM module_search WHERE lower(name) = ? ORDER BY module_id",
        (query.strip().lower(),),
    )
    rows = catalog._rows(
        "SELECT module_id, namespace FROM module_search"
        " WHERE head_terms @@ to_tsquery('simple', ?)"
        " ORDER BY ts_rank(head_terms, to_tsquery('simple', ?)) DESC, module_id LIMIT ?",
        (every, every, limit),
    )
    if len(rows) < limit:
        rows += catalog._rows(
            "SELECT module_id, namespace FROM module_search"
            " WHERE terms @@ to_tsquery('simple', ?)"
            " ORDER BY head_terms @@ to_tsquery('simple', ?) DESC,"
            " ts_rank(head_terms, to_tsquery('simple', ?)) DESC, module_id LIMIT ?",
            (every, every, some, limit),
        )
    found = [(int(r[0]), str(r[1])) for r in exact]
    for row in rows:
        if (int(row[0]), str(row[1])) not in found:
            found.append((int(row[0]), str(row[1])))
    return found[:limit]


def queries_of(count: int, rng: random.Random) -> list[str]:
    asked = []
    for i in range(count):
        kind = i % 4
        if kind == 0:
            asked.append(rng.choice(WORDS))  # matches thousands: ranking cost dominates
        elif kind == 1:
            asked.append(f"{rng.choice(WORDS)} {rng.choice(WORDS)}")
        elif kind == 2:
            asked.append(rng.choice(WORDS)[:3])  # prefix
        else:
            asked.append(f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{rng.randrange(10000)}")
    return asked


HIDDEN = "5 of 50 namespaces hidden"


def baseline_store(code: str, index: Any) -> Any:
    """`CatalogStore` of another checkout (`--baseline DIR`: main's code before a
    change) over the same index, for a "baseline" row in the same run. Its
    gitreg/catalog/store_sql.py is loaded alone, on top of this checkout's gitreg."""
    import importlib.util

    path = Path(code) / "gitreg" / "storage" / "catalog.py"
    spec = importlib.util.spec_from_file_location("baseline_catalog", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.CatalogStore(index)


def time_search(
    catalog: Any, asked: list[str], server_pid: int = 0, baseline: Any = None
) -> dict[str, Any]:
    """Each query asked of the previous search ("before"), of `--baseline`'s
    ("baseline") and of the current one ("after") in turn, so that all see the
    same moments of a shared machine."""
    old = before_search if catalog._dialect == "sqlite" else before_postgres_search
    # "hidden": as an anonymous reader with 5 of the 50 namespaces private asks
    # (left out inside the query, before the 1,000 candidates).
    hidden = frozenset(f"team{n}" for n in range(5))
    searches: dict[str, Callable[[str, int], list[tuple[int, str]]]] = {
        "before": lambda q, n: old(catalog, q, n)
    }
    if baseline is not None:
        searches["baseline"] = baseline.search
        searches[f"baseline, {HIDDEN}"] = lambda q, n: baseline.search(q, n, hidden)
    searches["after"] = catalog.search
    searches[f"after, {HIDDEN}"] = lambda q, n: catalog.search(q, n, hidden)
    times: dict[str, list[float]] = {label: [] for label in searches}
    cpu: dict[str, list[float]] = {label: [] for label in searches}
    server = dict.fromkeys(searches, 0.0)  # PostgreSQL's CPU (all its processes), seconds
    differ = 0
    results_differ = dict.fromkeys(("baseline", f"baseline, {HIDDEN}"), 0)
    for query in asked:
        # Compared at once, not kept: 2,000 answers of 1,000 tuples each would make
        # the collector's full passes part of the timings.
        answers = {}
        for label, search in searches.items():
            server_before = b.cpu_seconds(server_pid) if server_pid else 0.0
            start, start_cpu = time.perf_counter(), time.thread_time()
            answers[label] = search(query, SEARCH_CANDIDATES)
            times[label].append((time.perf_counter() - start) * 1000)
            # CPU time of this thread: what a shared machine disturbs least (on
            # PostgreSQL the work is in the server: there, wall time only).
            cpu[label].append((time.thread_time() - start_cpu) * 1000)
            if server_pid:  # 10 ms ticks: only the mean over all queries means anything
                server[label] += b.cpu_seconds(server_pid) - server_before
        differ += answers["before"] != answers["after"]
        if baseline is not None:  # the same answers as the baseline's, hidden or not
            for label in ("baseline", f"baseline, {HIDDEN}"):
                mine = answers[label.replace("baseline", "after")]
                results_differ[label] += answers[label] != mine
    results: dict[str, Any] = {}
    for label in searches:
        wall, used = sorted(times[label]), sorted(cpu[label])
        results[label] = {
            "p50": statistics.median(wall),
            "p99": wall[int(len(wall) * 0.99) - 1],
            "max": wall[-1],
            "cpu p50": statistics.median(used),
            "cpu p99": used[int(len(used) * 0.99) - 1],
            "server cpu": server[label] * 1000 / len(asked),
        }
    results["differ"] = differ
    results["baseline differ"] = sum(results_differ.values())
    results["labels"] = list(searches)
    return results


def settle_postgres(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def search_bench(
    args: argparse.Namespace, postgres_url: str, server_pid: int = 0
) -> list[list[object]]:
    from gitreg.catalog.store_sql import CatalogStore
    from gitreg.storage.index import open_index

    rows: list[list[object]] = []
    targets = [("sqlite", "")] + ([("postgresql", postgres_url)] if postgres_url else [])
    for engine, url in targets:
        with tempfile.TemporaryDirectory(prefix="gitreg-bench-") as tmp:
            index = open_index(url, Path(tmp) / "index.sqlite3")
            catalog = CatalogStore(index)
            b.progress(f"filling {args.modules} search rows ({engine})")
            fill_search(catalog, index, args.modules, random.Random(1))
            if url:  # as autovacuum does on a running server: GIN pending lists, statistics
                settle_postgres(url)
            b.progress(f"timing {args.queries} searches ({engine}, before and after in turn)")
            asked = queries_of(args.queries, random.Random(2))
            baseline = baseline_store(args.baseline, index) if args.baseline else None
            result = time_search(catalog, asked, server_pid if url else 0, baseline)
            b.progress(f"{engine}: {result['differ']} answers differ between before and after")
            if baseline is not None:
                b.progress(f"{engine}: {result['baseline differ']} differ from the baseline's")
            for label in result["labels"]:
                rows.append(
                    [f"{engine} {label}", args.modules, args.queries]
                    + [f"{result[label][k]:.2f}" for k in ("p50", "p99", "max")]
                    + [f"{result[label][k]:.2f}" for k in ("cpu p50", "cpu p99")]
                    + [f"{result[label]['server cpu']:.2f}" if url and server_pid else "-"]
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


class DocsClock:
    """CPU seconds spent inside `Documenter.document` and `update_search` (the
    whole of extraction, its index writes included), in whichever thread calls
    them: the cost itself, steadier on a shared machine than the difference of
    two whole syncs."""

    def __init__(self) -> None:
        from gitreg.catalog.documenter import Documenter

        self.seconds = 0.0
        self.saved = {n: getattr(Documenter, n) for n in ("document", "update_search")}
        for name, method in self.saved.items():
            setattr(Documenter, name, self._timed(method))

    def _timed(self, method: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.thread_time() - start

        return timed

    def close(self) -> float:
        from gitreg.catalog.documenter import Documenter

        for name, method in self.saved.items():
            setattr(Documenter, name, method)
        return self.seconds


def publish_once(source: Path, data: Path, with_docs: bool) -> tuple[float, float, float]:
    """(wall, CPU, documentation CPU) seconds of one `sync_repo` of every tag into
    a fresh data dir."""
    from gitreg.catalog import hcl, readme, tree
    from gitreg.git.backend import DulwichBackend
    from gitreg.modules.publisher import Publisher
    from gitreg.services import build_services
    from gitreg.settings import load_settings

    # Each run as a fresh process would: nothing parsed yet (the cache's name
    # changed when it got a byte bound; a "before" run has the older one).
    parses = getattr(hcl, "PARSES", None) or getattr(hcl, "_parse_cached", None)
    if parses is not None:
        parses.clear() if hasattr(parses, "clear") else parses.cache_clear()
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
    clock = DocsClock()
    start, start_cpu = time.perf_counter(), time.process_time() + _children_cpu()
    publisher.sync_repo(svc.index.repo(record.id))
    elapsed = time.perf_counter() - start
    # Archive worker processes included, when the builder starts them (builds.py).
    cpu = time.process_time() + _children_cpu() - start_cpu
    docs = clock.close()
    svc.close()
    return elapsed, cpu, docs


def publish_results(args: argparse.Namespace) -> dict[bool, list[tuple[float, float, float]]]:
    """(wall, CPU, documentation CPU) of each run, without docs (False) and with (True)."""
    with tempfile.TemporaryDirectory(prefix="gitreg-bench-") as tmp:
        root = Path(tmp)
        b.progress(f"making a module repository with {args.tags} tags")
        source = module_repo(root, args.tags)
        from gitreg.catalog.hcl import parse_file

        parse_file('variable "warm" {}')  # python-hcl2 builds its grammar once per process
        results: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
        for run in range(args.runs):
            for with_docs in (False, True):
                b.wait_quiet()
                data = root / f"data-{run}-{with_docs}"
                results[with_docs].append(publish_once(source, data, with_docs))
        return results


def publish_row(
    label: str, tags: int, results: dict[bool, list[tuple[float, float, float]]]
) -> list[object]:
    row: list[object] = [label, tags]
    for part in (0, 1):  # wall, then CPU: a shared machine disturbs CPU time least
        without = b.median([r[part] for r in results[False]])
        with_ = b.median([r[part] for r in results[True]])
        row += [f"{without:.3f}", f"{with_:.3f}", f"{(with_ / without - 1) * 100:+.1f}%"]
    # Documentation's own CPU, as a share of the sync without it.
    docs = b.median([r[2] for r in results[True]])
    cpu_without = b.median([r[1] for r in results[False]])
    return [*row, f"{docs * 1000:.1f}", f"{docs / cpu_without * 100:+.1f}%"]


def publish_bench(args: argparse.Namespace) -> list[list[object]]:
    """With `--baseline DIR`, the same measurement of the gitreg in DIR (another
    checkout: the code before a change) and of this one, each in processes of
    their own, taking turns `--rounds` times so both see the same machine."""
    if not args.baseline:
        return [publish_row("this", args.tags, publish_results(args))]
    pooled: dict[str, dict[bool, list[tuple[float, float, float]]]] = {}
    for _ in range(args.rounds):
        for label, code in (("before", args.baseline), ("after", str(b.ROOT))):
            b.progress(f"{args.runs} runs of the {label} code ({code})")
            command = [b.PYTHON, __file__, "--publish-only", "--json"]
            command += ["--tags", str(args.tags), "--runs", str(args.runs)]
            env = {**os.environ, "PYTHONPATH": code, "GITREG_BENCH_CODE": code}
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
            found = json.loads(out.stdout.splitlines()[-1])
            same = Path(found["code"]).resolve() == Path(code).resolve()
            b.require(same, f"the {label} run imported the gitreg in {found['code']}")
            into = pooled.setdefault(label, {False: [], True: []})
            for key, runs in ((False, found["without"]), (True, found["with"])):
                into[key] += [(float(w), float(c), float(d)) for w, c, d in runs]
    return [publish_row(label, args.tags, results) for label, results in pooled.items()]


def search_table(args: argparse.Namespace) -> str:
    headers = ["index", "modules", "queries", "p50 ms", "p99 ms", "max ms", "cpu p50", "cpu p99"]
    headers.append("server cpu ms/q")
    if args.postgres != "start":
        return b.table(headers, search_bench(args, args.postgres))
    # A server of its own (Debian's package, started and removed as the tests do).
    from tests.support.postgres import start_postgres

    server = start_postgres()
    try:
        assert server.process is not None
        url, pid = server.create_database().url, server.process.pid
        return b.table(headers, search_bench(args, url, pid))
    finally:
        server.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--tags", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--postgres",
        default="",
        help="an empty PostgreSQL database's URL, or 'start' for a server of its own",
    )
    parser.add_argument("--search-only", action="store_true", help="skip the publish part")
    parser.add_argument("--publish-only", action="store_true", help="no search half")
    parser.add_argument(
        "--baseline", default="", help="a checkout to compare the publish (and search) with"
    )
    parser.add_argument("--rounds", type=int, default=2, help="turns each, with --baseline")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # for --baseline
    args = parser.parse_args()
    if args.json:
        import gitreg

        found = publish_results(args)
        code = str(Path(gitreg.__file__).parent.parent)  # which checkout was measured
        print(json.dumps({"without": found[False], "with": found[True], "code": code}))
        return 0
    print(b.machine_line())
    if not args.publish_only:
        print(search_table(args))
        if args.search_only:
            return 0
        print()
    headers = ["code", "tags", "without docs s", "with docs s", "adds", "cpu without s"]
    headers += ["cpu with s", "cpu adds", "docs cpu ms", "docs cpu adds"]
    print(b.table(headers, publish_bench(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

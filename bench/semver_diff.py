"""The semver guard's diff of two versions of a large module (docs/semver-guard.md).

A module of `--variables` variables (a third with nested object types and
`optional()` defaults), as many outputs as a quarter of that, 100 resources
and 2 submodules; the second version removes, narrows, widens and adds a few of
each. Timed: reading the two stored documents' JSON, making the interfaces and
classifying the changes (what `GET .../VERSION/changes` does after its two
document reads), over `--runs` runs; then the same through `SemverGuard.changes`
on a real SQLite index (the two document reads included).

    python bench/semver_diff.py [--variables 200] [--runs 200]

With `--publish`, what the guard adds to publishing: bench/catalog.py's module
repository (60 variables, 24 outputs, 2 submodules, 2 examples, 300 other
files; `--tags` minor releases) published with `semver_check = off` and then
`warn` into fresh data dirs, `--runs` times each; the process's CPU seconds
and those spent inside the guard (`review`, `published`, `still_refused`).

    python bench/semver_diff.py --publish [--tags 40] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gitreg.catalog.extract import Origin, extract
from gitreg.semver_guard.diff import diff
from gitreg.semver_guard.interface import interface_of


def variables(count: int, version: int) -> str:
    out = []
    for i in range(count):
        kind = i % 3
        if kind == 0:
            typ = "string" if not (version == 2 and i % 30 == 0) else "number"
            out.append(f'variable "v{i}" {{\n  type = {typ}\n  description = "Variable {i}"\n}}\n')
        elif kind == 1:
            out.append(f'variable "v{i}" {{\n  type    = list(number)\n  default = [{i}]\n}}\n')
        else:
            extra = "    extra = optional(bool, true)\n" if version == 2 and i % 20 == 2 else ""
            out.append(
                f'variable "v{i}" {{\n  type = map(object({{\n    name = string\n'
                f"    size = optional(number, {i})\n"
                "    tags = optional(map(string), {})\n"
                f"    rules = optional(list(object({{ port = number, cidr = string }})), [])\n"
                f"{extra}  }}))\n  default = {{}}\n}}\n"
            )
    return "".join(out)


def files(count: int, version: int) -> dict[str, bytes]:
    body = variables(count if version == 1 else count - 5, version)
    if version == 2:
        body += 'variable "added" {\n  type = bool\n  default = false\n}\n'
    outputs = "".join(
        f'output "o{i}" {{\n  value = {i}\n}}\n' for i in range(count // 4 - (version == 2))
    )
    resources = "".join(f'resource "null_resource" "r{i}" {{\n}}\n' for i in range(100))
    versions = (
        'terraform {\n  required_version = ">= 1.3"\n  required_providers {\n'
        '    aws = { source = "hashicorp/aws", version = "'
        + ("~> 5.0" if version == 1 else ">= 5.0")
        + '" }\n  }\n}\n'
    )
    sub = 'variable "x" {\n  type = string\n}\n'
    return {
        "variables.tf": body.encode(),
        "outputs.tf": outputs.encode(),
        "main.tf": resources.encode(),
        "versions.tf": versions.encode(),
        "modules/a/main.tf": sub.encode(),
        "modules/b/main.tf": sub.encode(),
    }


def documents(count: int) -> tuple[str, str]:
    origin = Origin("https://example.com/m.git", "c" * 40, "", "1.0.0")
    return tuple(  # type: ignore[return-value]
        json.dumps(extract(files(count, v), origin, []), sort_keys=True) for v in (1, 2)
    )


def pure(old: str, new: str, runs: int) -> tuple[list[float], int]:
    times, found = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        changes = diff(interface_of(json.loads(old)), interface_of(json.loads(new)))
        times.append(time.perf_counter() - start)
        found = len(changes)
    return times, found


def through_service(old: str, new: str, runs: int) -> list[float]:
    from gitreg.services import build_services
    from gitreg.settings import load_settings
    from gitreg.storage.records import NewVersion

    with tempfile.TemporaryDirectory() as tmp:
        svc = build_services(load_settings({"data_dir": Path(tmp)}, environ={}))
        try:
            repo = svc.index.add_repo("https://example.com/m.git", "")
            svc.index.add_module(repo.id, "acme", "big", "aws", "", "")
            module = svc.index.find_module("acme", "big", "aws")
            assert module is not None
            for version, text in (("1.0.0", old), ("1.1.0", new)):
                svc.index.publish_version(
                    NewVersion(
                        module.id,
                        version,
                        version,
                        "v" + version,
                        "t" * 40,
                        "c" * 40,
                        "e" * 40,
                        "0" * 64,
                        1,
                        0,
                        "bench",
                        "",
                        "",
                    )
                )
                svc.catalog_index.put_docs(module.id, version, 2, text)
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                svc.semver.changes(("acme", "big", "aws"), "1.1.0", None)
                times.append(time.perf_counter() - start)
            return times
        finally:
            svc.close()


def publish_once(source: Path, data: Path, policy: str) -> tuple[float, float, float]:
    """(wall, CPU, guard CPU) seconds of one sync of every tag into a fresh data dir."""
    from gitreg.catalog import hcl, tree
    from gitreg.semver_guard.service import SemverGuard
    from gitreg.services import build_services
    from gitreg.settings import load_settings

    # Each run as a fresh process would, as bench/catalog.py's runs are made.

    hcl.PARSES.clear()
    tree._TEXTS.clear()
    tree._TREES.clear()
    from gitreg.semver_guard import types

    types.parse_type.cache_clear()
    spent = [0.0]
    saved = {n: getattr(SemverGuard, n) for n in ("review", "published", "still_refused")}

    def timed(method: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                spent[0] += time.thread_time() - start

        return run

    for name, method in saved.items():
        setattr(SemverGuard, name, timed(method))
    try:
        settings = {"data_dir": data, "archive_workers": 1, "semver_check": policy}
        svc = build_services(load_settings(settings, environ={}))
        record = svc.index.add_repo(str(source), "")
        svc.index.add_module(record.id, "acme", "bench", "aws", "", "")
        start, start_cpu = time.perf_counter(), time.process_time()
        svc.publisher.sync_repo(svc.index.repo(record.id))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        svc.close()
    finally:
        for name, method in saved.items():
            setattr(SemverGuard, name, method)
    return elapsed, cpu, spent[0]


def publish_bench(tags: int, runs: int) -> None:
    import catalog
    from benchlib import median

    from gitreg.catalog.hcl import parse_file

    with tempfile.TemporaryDirectory(prefix="gitreg-bench-") as tmp:
        root = Path(tmp)
        source = catalog.module_repo(root, tags)
        parse_file('variable "warm" {}')  # python-hcl2 builds its grammar once per process
        results: dict[str, list[tuple[float, float, float]]] = {"off": [], "warn": []}
        for run in range(runs):
            for policy in results:
                results[policy].append(publish_once(source, root / f"d{run}{policy}", policy))
    off_cpu = median([r[1] for r in results["off"]])
    print(f"{tags} tags, {runs} runs each, medians:")
    for policy, rows in results.items():
        wall, cpu, guard = (median([r[i] for r in rows]) for i in range(3))
        share = f"{(cpu / off_cpu - 1) * 100:+.1f}%" if policy == "warn" else "-"
        print(
            f"semver_check {policy:<5} wall {wall:.3f} s  cpu {cpu:.3f} s ({share})"
            f"  guard cpu {guard * 1000:.1f} ms ({guard / off_cpu * 100:.1f}% of off's cpu)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variables", type=int, default=200)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--publish", action="store_true")
    parser.add_argument("--tags", type=int, default=40)
    args = parser.parse_args()
    if args.publish:
        publish_bench(args.tags, args.runs)
        return
    old, new = documents(args.variables)
    times, found = pure(old, new, args.runs)
    service = through_service(old, new, args.runs)
    print(f"variables {args.variables}, documents {len(old) / 1e3:.0f} kB, {found} changes")
    for label, values in (("documents -> diff", times), ("SemverGuard.changes", service)):
        values.sort()
        p50 = statistics.median(values) * 1000
        p99 = values[int(len(values) * 0.99) - 1] * 1000
        print(f"{label:<22} p50 {p50:.2f} ms  p99 {p99:.2f} ms  max {values[-1] * 1000:.2f} ms")


if __name__ == "__main__":
    main()

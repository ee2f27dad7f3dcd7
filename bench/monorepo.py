"""A monorepo of many modules published in one fetch: `repo add --modules`.

A synthetic bare repository (git fast-import): `--modules` module directories under
`modules/` (8 small files each: .tf files, a README, an example) plus a shared
`README.md`. Two layouts, each published by one `gitreg repo add` (one fetch):

- per-module tags: `--tags` tags per module named `{name}/v1.N.0`, each on its own
  commit changing that module only (modules x tags commits);
- shared tags: `--tags` tags `v1.N.0`, each on a commit changing two modules; every
  module gets every tag (modules x tags versions).

Each layout runs with per-directory archives (the `--modules` default: an archive is
the module's directory, reused while that directory is unchanged) and with
`--whole-tree` (the archive of every version is the whole repository tree, as for
`--module --subdir`). Wall time and peak RSS of the CLI and its worker processes.

    python bench/monorepo.py [--modules 50] [--tags 100]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import benchlib as b

_FILES = ("main.tf", "variables.tf", "outputs.tf", "versions.tf", "locals.tf", "README.md")


def _module_files(rng: random.Random, name: str) -> dict[str, bytes]:
    files = {f"modules/{name}/{f}": b._text(rng, rng.randint(300, 3_000)) for f in _FILES}
    files[f"modules/{name}/examples/basic/main.tf"] = b._text(rng, 600)
    files[f"modules/{name}/examples/basic/README.md"] = b._text(rng, 400)
    return files


def monorepo(path: Path, modules: int, tags: int, per_module: bool, seed: int = 1) -> int:
    """Build the bare repository; returns the number of tags."""
    rng = random.Random(seed)
    path.mkdir(parents=True)
    b.git(path, "init", "-q", "--bare", "-b", "main")
    names = [f"mod{n:02d}" for n in range(modules)]
    when = 1_700_000_000
    stream = bytearray(b"commit refs/heads/main\nmark :1\n")
    stream += b._commit_header(when, "initial", None)
    stream += b._inline("README.md", b"# infra\n")
    for name in names:
        for file, data in _module_files(rng, name).items():
            stream += b._inline(file, data)
    stream += b"\n"
    mark, made = 1, 0
    rounds = [(name, t) for t in range(tags) for name in names] if per_module else []
    if not per_module:
        rounds = [("", t) for t in range(tags)]
    for name, t in rounds:
        changed = [name] if name else rng.sample(names, 2)
        when += 60
        stream += f"commit refs/heads/main\nmark :{mark + 1}\n".encode()
        stream += b._commit_header(when, f"change {name or t}", f":{mark}")
        for module in changed:
            file = f"modules/{module}/{rng.choice(_FILES)}"
            stream += b._inline(file, b._text(rng, rng.randint(300, 3_000)))
        stream += b"\n"
        mark += 1
        tag = f"{name}/v1.{t}.0" if name else f"v1.{t}.0"
        stream += f"reset refs/tags/{tag}\nfrom :{mark}\n\n".encode()
        made += 1
    b.git(path, "fast-import", "--quiet", stdin=bytes(stream))
    b.git(path, "repack", "-a", "-d", "-q")
    b.git(path, "prune-packed")
    return made


def run(args: argparse.Namespace, ws: Path) -> str:
    rows: list[list[object]] = []
    for per_module in (True, False):
        src = ws / ("per-module.git" if per_module else "shared.git")
        made = monorepo(src, args.modules, args.tags, per_module)
        pattern = ["--tag-pattern", "{name}/v{version}"] if per_module else []
        for whole in (False,) if args.no_whole_tree else (False, True):
            b.wait_quiet()
            data = ws / f"data-{len(rows)}"
            label = "per-module tags" if per_module else "shared tags"
            scope = "whole tree" if whole else "module directory"
            b.progress(f"repo add --modules: {label}, {scope}")
            flags = ["--whole-tree"] if whole else []
            done = b.gitreg_cli(
                data,
                *("repo", "add", str(src), "--modules", "modules/*"),
                *("--namespace", "acme", "--system", "aws", *pattern, *flags),
            )
            published = args.modules * args.tags
            b.require(f"{published} published" in done.stdout, done.stdout[-500:])
            blobs = [p for p in (data / "blobs" / "sha256").rglob("*") if p.is_file()]
            stored = sum(p.stat().st_size for p in blobs) / 1e6
            rows.append(
                [
                    label,
                    made,
                    scope,
                    published,
                    len(blobs),
                    f"{stored:,.1f}",
                    f"{done.seconds:.1f}",
                    f"{done.cpu_seconds:.1f}",
                    b.mib(done.maxrss_kib),
                    b.mib(done.tree_rss_kib),
                ]
            )
    return "\n".join(
        [
            "## A monorepo in one fetch (`repo add --modules 'modules/*'`)",
            "",
            f"Machine: {b.machine_line()}",
            "",
            f"{args.modules} modules of 8 files (~12 kB) each; {args.tags} tags per module.",
            "",
            b.table(
                [
                    "tags",
                    "tags in repo",
                    "archive",
                    "versions",
                    "archives",
                    "MB stored",
                    "repo add s",
                    "CPU s",
                    "peak RSS MiB (CLI)",
                    "peak RSS MiB (CLI + workers)",
                ],
                rows,
            ),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=50)
    parser.add_argument("--tags", type=int, default=100)
    parser.add_argument(
        "--no-whole-tree", action="store_true", help="only the per-directory archive rows"
    )
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    with b.workspace("monorepo", args.keep) as ws:
        print(run(args, ws))
    b.progress(f"done in {time.perf_counter() - started:.0f} s")
    sys.exit(0)


if __name__ == "__main__":
    main()

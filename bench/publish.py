"""Publishing a large repository: `gitreg repo add`, per-archive cost, tag-to-listed latency.

A synthetic bare repository (bench/benchlib.py `synthetic_repo`): 5,000 files up to four
directories deep (94% 200 B-3 kB, 5.5% 4-32 kB, 0.5% 128-512 kB of which half are
incompressible), 200 tags, each on a commit that changes 4 files; every fourth tag is
annotated.

1. `gitreg repo add` (fetch into the bare mirror + build and store all 200 archives + index
   writes): wall time and the CLI's peak RSS (wait4 ru_maxrss).
2. The fetch alone and one archive build alone, each in its own process (time, peak RSS),
   and per-archive build time on a sample of tags, split into reading objects (dulwich),
   gzip level 6, and the rest (tar headers, name checks, hashing, writing).
3. `git tag` + `gitreg sync` until a running `gitreg serve` lists the new version.

    python bench/publish.py [--files 5000] [--tags 200] [--sample 12]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import benchlib as b

MODULE = "acme/big/aws"
# The forge name and secret the webhook deliveries of bench/publish_tag.py carry.
REGISTER = ("--forge-repo", "acme/terraform-aws-big", "--webhook-secret", "bench-publish-secret")


def worker_fetch(src: str, mirror: str) -> dict[str, float]:
    from gitreg.git.backend import DulwichBackend

    start = time.perf_counter()
    DulwichBackend().fetch(src, Path(mirror))
    return {"seconds": time.perf_counter() - start}


def worker_tags(mirror: str) -> dict[str, Any]:
    """Listing and peeling every tag of the mirror, as each sync does."""
    from gitreg.git.backend import DulwichBackend

    start = time.perf_counter()
    tags, _ = DulwichBackend().tags(Path(mirror))
    return {"seconds": time.perf_counter() - start, "tags": len(tags)}


def worker_import() -> dict[str, Any]:
    start = time.perf_counter()
    import gitreg.cli
    import gitreg.services

    del gitreg
    return {"seconds": time.perf_counter() - start}


def worker_one(mirror: str) -> dict[str, Any]:
    """One archive (the last tag's) exactly as the publisher builds it, nothing kept."""
    from gitreg.archives.build import ArchiveLimits
    from gitreg.git.backend import DulwichBackend

    backend = DulwichBackend()
    ref = backend.tags(Path(mirror))[0][-1]
    start = time.perf_counter()
    backend.archive(Path(mirror), ref.tree_sha, b.NullSink(), ref.commit_time, ArchiveLimits())
    return {"seconds": time.perf_counter() - start}


def worker_archives(mirror: str, sample: int, builder: str = "", warm: str = "") -> dict[str, Any]:
    """Per-archive timings on `sample` tags spread over the history; with `builder`
    (gitreg/archives/format.py) that builder, else the gitreg in use's only one. With
    `warm`, each build follows the previous tag's (untimed) in one directory cache
    (gitreg/archives/cache.py), as the builds of a `repo add` follow each other."""
    from dulwich.objects import Blob, ObjectID, Tree
    from dulwich.repo import Repo

    from gitreg.archives.build import build_archive
    from gitreg.git.backend import DulwichBackend

    tags, _ = DulwichBackend().tags(Path(mirror))
    step = max(1, len(tags) // sample)
    chosen = tags[::step][:sample]
    repo = Repo(mirror)
    store = repo.object_store
    builds, reads, gzips, sizes, files = [], [], [], [], []
    cache: Any = None
    if warm:
        from gitreg.archives.cache import SubtreeCache

        cache = SubtreeCache()
    for ref in chosen:
        sink = b.NullSink(keep=True)
        root = ref.tree_sha.encode()
        if cache is not None:
            before = tags[max(0, tags.index(ref) - 1)]
            prior = before.tree_sha.encode()
            build_archive(store, prior, b.NullSink(), mtime=before.commit_time, cache=cache)
            start = time.perf_counter()
            report = build_archive(
                store, root, sink, mtime=ref.commit_time, builder=builder, cache=cache
            )
        elif builder:
            start = time.perf_counter()
            report = build_archive(store, root, sink, mtime=ref.commit_time, builder=builder)
        else:  # the baseline's build_archive has no builder
            start = time.perf_counter()
            report = build_archive(store, root, sink, mtime=ref.commit_time)
        builds.append(time.perf_counter() - start)
        archive = b"".join(sink.chunks)
        sizes.append(len(archive))
        files.append(report.files)
        # Reading every object of the tree, as the build does, and nothing else.
        start = time.perf_counter()
        stack = [store[ObjectID(ref.tree_sha.encode())]]
        while stack:
            tree = stack.pop()
            assert isinstance(tree, Tree)
            for entry in tree.iteritems():
                obj = store[entry.sha]
                if isinstance(obj, Tree):
                    stack.append(obj)
                elif isinstance(obj, Blob):
                    obj.as_raw_string()
        reads.append(time.perf_counter() - start)
        # Compressing the same tar stream the same way, and nothing else.
        tar = gzip.decompress(archive)
        start = time.perf_counter()
        if "isal" in builder:
            from isal import igzip

            igzip.compress(tar, compresslevel=1, mtime=0)
        else:
            gzip.compress(tar, compresslevel=6, mtime=0)
        gzips.append(time.perf_counter() - start)
    repo.close()
    return {
        "tags": [r.name for r in chosen],
        "build": builds,
        "read": reads,
        "gzip": gzips,
        "archive_bytes": sizes,
        "files": files,
        "warm": bool(warm),
    }


def in_worker(*argv: str, cwd: Path | None = None) -> tuple[dict[str, Any], b.Finished]:
    """A worker of this script in its own process; with `cwd`, the gitreg found there."""
    env = {"PYTHONPATH": str(cwd)} if cwd else None
    script = str(Path(__file__).resolve())
    done = b.run_measured([b.PYTHON, script, "--worker", *argv], env=env, cwd=cwd)
    if done.returncode != 0:
        raise RuntimeError(done.stdout)
    last = done.stdout.strip().splitlines()[-1]
    return json.loads(last), done


def run(args: argparse.Namespace, ws: Path) -> str:
    start = time.perf_counter()
    src = b.synthetic_repo(ws / "src.git", files=args.files, tags=args.tags)
    made = time.perf_counter() - start
    base = b.baseline_tree(ws, args.baseline)
    from gitreg.archives.format import CLASSIC, fast_builder

    adds: dict[str, b.Finished] = {}
    for label, env, cwd in [
        (f"baseline ({args.baseline})", {}, base),
        ("now, archive_workers = 1", {"GITREG_ARCHIVE_WORKERS": "1"}, None),
        ("now (archive_workers = 0: one per core)", {}, None),
    ]:
        b.wait_quiet()
        b.progress(f"repo add: {label}")
        data = ws / f"data-{len(adds)}"
        register = ("repo", "add", str(src.path), "--module", MODULE, *REGISTER)
        done = b.gitreg_cli(data, *register, env=env, cwd=cwd)
        b.require(f"{args.tags} published" in done.stdout, f"repo add: {done.stdout[-500:]}")
        adds[label] = done
    data, data_base = ws / "data-2", ws / "data-0"
    mirror = str(data / "git" / "1.git")
    blobs = [p for p in (data / "blobs" / "sha256").rglob("*") if p.is_file()]
    blobs_base = [p for p in (data_base / "blobs" / "sha256").rglob("*") if p.is_file()]

    samples = {}
    fast = fast_builder()
    for label, extra, cwd in [
        (f"baseline ({args.baseline}), builder {fast}", [fast], base),
        ("now, builder tar-pax+zlib-6 (headers written directly)", [CLASSIC], None),
        (f"now, builder {fast}, cold", [fast], None),
        (f"now, builder {fast}, after the previous tag's build", [fast, "warm"], None),
    ]:
        b.wait_quiet()
        samples[label], _ = in_worker("archives", mirror, str(args.sample), *extra, cwd=cwd)
    latencies = new_tags(args, ws, src, [("baseline", data_base, base), ("now", data, None)])
    return report(args, src, made, adds, blobs, blobs_base, samples, latencies)


def new_tags(
    args: argparse.Namespace,
    ws: Path,
    src: b.SyntheticRepo,
    setups: list[tuple[str, Path, Path | None]],
) -> str:
    """bench/publish_tag.py: push to installable through a webhook and through the
    CLI, on a running server of the baseline and of now."""
    import publish_tag as tag_path  # here: it needs tests/ on the path, workers do not

    tls = b.make_tls(ws / "tls")
    with b.servers() as started:
        sides = []
        for label, data, cwd in setups:
            sides.append(tag_path.start(label, data, cwd, tls, ws))
            started.append(sides[-1].server)
        rows = tag_path.rounds(src, sides, tls, ws, args.new_tags)
    return tag_path.table(sides, rows)


def report(
    args: argparse.Namespace,
    src: b.SyntheticRepo,
    made: float,
    adds: dict[str, b.Finished],
    blobs: list[Path],
    blobs_base: list[Path],
    samples: dict[str, dict[str, Any]],
    latencies: str,
) -> str:
    stored = sum(p.stat().st_size for p in blobs) / 1e6
    stored_base = sum(p.stat().st_size for p in blobs_base) / 1e6
    first = next(iter(adds.values())).seconds
    add_rows = [
        [
            label,
            f"{d.seconds:.1f}",
            f"{first / d.seconds:.2f}x",
            f"{d.cpu_seconds:.1f}",
            b.mib(d.maxrss_kib),
            b.mib(d.tree_rss_kib),
        ]
        for label, d in adds.items()
    ]
    sample_rows = []
    for label, sample in samples.items():
        build, read, gz = sample["build"], sample["read"], sample["gzip"]
        rest = [x - y - z for x, y, z in zip(build, read, gz, strict=True)]
        cells = [f"{statistics.mean(v):.3f}" for v in (build, read, gz, rest)]
        if sample.get("warm"):  # unchanged directories: nothing read, no header built
            cells[1] = cells[3] = "-"
        mb = f"{statistics.mean(sample['archive_bytes']) / 1e6:.2f}"
        sample_rows.append([label, *cells, mb])
    out = [
        "## Publishing a large repository",
        "",
        f"Machine: {b.machine_line()}",
        "",
        f"Synthetic repository: {args.files:,} files, {args.tags} tags, tree"
        f" {src.tree_bytes / 1e6:.1f} MB, pack {src.pack_bytes / 1e6:.1f} MB (made in"
        f" {made:.0f} s). Archives stored: baseline {len(blobs_base)}, {stored_base:,.0f} MB;"
        f" now {len(blobs)}, {stored:,.0f} MB.",
        "",
        b.table(
            [
                "`gitreg repo add` (fetch + archives + index)",
                "wall s",
                "speed-up",
                "CPU s (with workers)",
                "peak RSS MiB (CLI)",
                "peak RSS MiB (CLI + workers)",
            ],
            add_rows,
        ),
        "",
        f"Per-archive build ({len(next(iter(samples.values()))['build'])} tags spread over"
        " the history, in one process, to a hashing null sink), mean seconds:",
        "",
        b.table(
            ["code and builder", "build", "object reads", "deflate", "rest (tar, checks)", "MB"],
            sample_rows,
        ),
        "",
        "One new tag, `git push` to installable (bench/publish_tag.py): the version"
        " listed by the running server and its archive downloaded; through the GitHub"
        " webhook (the server's job syncs) or `gitreg sync MODULE`. CPU: the server's,"
        " plus the CLI's:",
        "",
        latencies,
    ]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5_000)
    parser.add_argument("--tags", type=int, default=200)
    parser.add_argument("--sample", type=int, default=12, help="tags timed one by one")
    parser.add_argument("--new-tags", type=int, default=3, help="tag-to-listed repetitions")
    parser.add_argument("--baseline", default="main", help="git revision to compare with")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, *rest = args.worker
        if kind == "fetch":
            result: dict[str, Any] = dict(worker_fetch(*rest))
        elif kind == "one":
            result = worker_one(rest[0])
        elif kind == "tags":
            result = worker_tags(rest[0])
        elif kind == "import":
            result = worker_import()
        else:
            result = worker_archives(rest[0], int(rest[1]), *rest[2:])
        print(json.dumps(result))
        sys.exit(0)
    with b.workspace("publish", args.keep) as ws:
        print(run(args, ws))


if __name__ == "__main__":
    main()

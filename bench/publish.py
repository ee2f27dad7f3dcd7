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
    from gitreg.archive import ArchiveLimits
    from gitreg.git.backend import DulwichBackend

    backend = DulwichBackend()
    ref = backend.tags(Path(mirror))[0][-1]
    start = time.perf_counter()
    backend.archive(Path(mirror), ref.tree_sha, b.NullSink(), ref.commit_time, ArchiveLimits())
    return {"seconds": time.perf_counter() - start}


def worker_archives(mirror: str, sample: int) -> dict[str, Any]:
    """Per-archive timings on `sample` tags spread over the history."""
    from dulwich.objects import Blob, ObjectID, Tree
    from dulwich.repo import Repo

    from gitreg.archive import ArchiveLimits, build_archive
    from gitreg.git.backend import DulwichBackend

    tags, _ = DulwichBackend().tags(Path(mirror))
    step = max(1, len(tags) // sample)
    chosen = tags[::step][:sample]
    repo = Repo(mirror)
    store = repo.object_store
    builds, reads, gzips, sizes, files = [], [], [], [], []
    for ref in chosen:
        sink = b.NullSink(keep=True)
        start = time.perf_counter()
        report = build_archive(
            store, ref.tree_sha.encode(), sink, mtime=ref.commit_time, limits=ArchiveLimits()
        )
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
        # Compressing the same tar stream at the same level, and nothing else.
        tar = gzip.decompress(archive)
        start = time.perf_counter()
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
    }


def in_worker(*argv: str) -> tuple[dict[str, Any], b.Finished]:
    done = b.run_measured([b.PYTHON, str(Path(__file__).resolve()), "--worker", *argv])
    if done.returncode != 0:
        raise RuntimeError(done.stdout)
    last = done.stdout.strip().splitlines()[-1]
    return json.loads(last), done


def run(args: argparse.Namespace, ws: Path) -> str:
    start = time.perf_counter()
    src = b.synthetic_repo(ws / "src.git", files=args.files, tags=args.tags)
    made = time.perf_counter() - start
    data = ws / "data"

    b.wait_quiet()
    added = b.gitreg_cli(data, "repo", "add", str(src.path), "--module", MODULE)
    b.require(f"{args.tags} published" in added.stdout, f"repo add: {added.stdout[-500:]}")
    blobs = [p for p in (data / "blobs" / "sha256").rglob("*") if p.is_file()]
    stored = sum(p.stat().st_size for p in blobs)

    b.wait_quiet()
    fetched, fetch_run = in_worker("fetch", str(src.path), str(ws / "scratch.git"))
    b.wait_quiet()
    _, one_run = in_worker("one", str(data / "git" / "1.git"))
    b.wait_quiet()
    sample, _ = in_worker("archives", str(data / "git" / "1.git"), str(args.sample))

    # Tag to listed, with a server running on the same data dir.
    tls = b.make_tls(ws / "tls")
    latencies: list[list[Any]] = []
    with b.servers() as started:
        server = b.start_gitreg(data, tls, ws)
        started.append(server)
        for n in range(args.new_tags):
            commit = src.add_commit()
            name = f"v2.0.{n}"
            b.wait_quiet()
            t0 = time.perf_counter()
            b.tag(src.path, name, commit)
            tagged = time.perf_counter() - t0
            synced = b.gitreg_cli(data, "sync", MODULE)
            after_sync = time.perf_counter() - t0
            listed = wait_listed(server, tls, name.lstrip("v"), deadline_s=60)
            total = time.perf_counter() - t0
            latencies.append([name, tagged, synced.seconds, after_sync, listed, total])
        # Where a one-tag sync's time goes.
        b.wait_quiet()
        noop = b.gitreg_cli(data, "sync", MODULE)
        b.wait_quiet()
        imported, _ = in_worker("import")
        b.tag(src.path, f"v2.1.{args.new_tags}", src.add_commit())
        b.wait_quiet()
        incremental, _ = in_worker("fetch", str(src.path), str(data / "git" / "1.git"))
        b.wait_quiet()
        listing, _ = in_worker("tags", str(data / "git" / "1.git"))

    build, read, gz = sample["build"], sample["read"], sample["gzip"]
    sizes = sample["archive_bytes"]
    fetch_s = float(fetched["seconds"])
    mean_build = statistics.mean(build)
    rest = added.seconds - fetch_s - args.tags * mean_build

    out = [
        "## Publishing a large repository",
        "",
        f"Machine: {b.machine_line()}",
        "",
        f"Synthetic repository: {args.files:,} files, {args.tags} tags, tree"
        f" {src.tree_bytes / 1e6:.1f} MB, pack {src.pack_bytes / 1e6:.1f} MB (made in"
        f" {made:.0f} s). Archives stored: {len(blobs)}, {stored / 1e6:,.0f} MB in all,"
        f" {statistics.mean(sizes) / 1e6:.1f} MB each.",
        "",
        b.table(
            ["step", "wall s", "peak RSS MiB", "note"],
            [
                [
                    f"`gitreg repo add` ({args.tags} versions)",
                    f"{added.seconds:.1f}",
                    b.mib(added.maxrss_kib),
                    "fetch + archives + index, one process",
                ],
                [
                    "of which: fetch into an empty mirror",
                    f"{fetch_s:.1f}",
                    b.mib(fetch_run.maxrss_kib),
                    "measured alone (DulwichBackend.fetch, local path)",
                ],
                [
                    "of which: one archive build",
                    f"{mean_build:.2f}",
                    b.mib(one_run.maxrss_kib),
                    f"mean of {len(build)}; peak RSS of a process building one",
                ],
                [
                    "of which: the rest",
                    f"{rest:.1f}",
                    "",
                    "start-up, tags, fsync of each blob, index writes",
                ],
            ],
        ),
        "",
        f"Per-archive build ({len(build)} tags spread over the history, each"
        f" {statistics.mean(sample['files']):,.0f} files):",
        "",
        b.table(
            ["part", "mean s", "min s", "max s", "share"],
            [
                _row("whole build (to a hashing null sink)", build, mean_build),
                _row("reading tree + blob objects (dulwich)", read, mean_build),
                _row("gzip level 6 of the tar stream", gz, mean_build),
                _row(
                    "rest: tarfile, name checks, sorting",
                    [x - y - z for x, y, z in zip(build, read, gz, strict=True)],
                    mean_build,
                ),
            ],
        ),
        "",
        "Tag to listed (`git tag`, then `gitreg sync MODULE`, then poll the running"
        " server's versions answer every 20 ms):",
        "",
        b.table(
            ["tag", "git tag s", "gitreg sync s", "tag+sync s", "then listed after s", "total s"],
            [[row[0], *(f"{v:.2f}" for v in row[1:])] for row in latencies],
        ),
        "",
        "Where a one-tag sync's time goes (each measured alone):",
        "",
        b.table(
            ["part", "s"],
            [
                ["`gitreg sync MODULE` with nothing new (whole CLI run)", f"{noop.seconds:.2f}"],
                ["of which: importing gitreg (CLI + services)", f"{imported['seconds']:.2f}"],
                ["incremental fetch of 1 new tag into the mirror", f"{incremental['seconds']:.2f}"],
                [f"listing and peeling {listing['tags']} tags", f"{listing['seconds']:.2f}"],
                ["building the one new archive (mean above)", f"{mean_build:.2f}"],
            ],
        ),
    ]
    return "\n".join(out)


def _row(label: str, values: list[float], whole: float) -> list[object]:
    mean = statistics.mean(values)
    return [
        label,
        f"{mean:.3f}",
        f"{min(values):.3f}",
        f"{max(values):.3f}",
        f"{mean / whole:.0%}",
    ]


def wait_listed(server: b.Server, tls: b.Tls, version: str, deadline_s: float) -> float:
    """Seconds since the call until the versions answer contains `version`."""
    path = f"/v1/modules/{MODULE}/versions"
    start = time.perf_counter()
    while time.perf_counter() - start < deadline_s:
        status, _, body = b.fetch(server.url(path), tls.ca)
        if status == 200 and any(
            v["version"] == version for v in json.loads(body)["modules"][0]["versions"]
        ):
            return time.perf_counter() - start
        time.sleep(0.02)
    raise SystemExit(f"{version} not listed within {deadline_s} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5_000)
    parser.add_argument("--tags", type=int, default=200)
    parser.add_argument("--sample", type=int, default=12, help="tags timed one by one")
    parser.add_argument("--new-tags", type=int, default=3, help="tag-to-listed repetitions")
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
            result = worker_archives(rest[0], int(rest[1]))
        print(json.dumps(result))
        sys.exit(0)
    with b.workspace("publish", args.keep) as ws:
        print(run(args, ws))


if __name__ == "__main__":
    main()

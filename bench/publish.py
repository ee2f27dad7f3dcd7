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
import subprocess
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


def worker_archives(mirror: str, sample: int, builder: str = "") -> dict[str, Any]:
    """Per-archive timings on `sample` tags spread over the history; with `builder`
    (gitreg/archive_format.py) that builder, else the gitreg in use's only one."""
    from dulwich.objects import Blob, ObjectID, Tree
    from dulwich.repo import Repo

    from gitreg.archive import build_archive
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
        root = ref.tree_sha.encode()
        if builder:
            report = build_archive(store, root, sink, mtime=ref.commit_time, builder=builder)
        else:  # the baseline's build_archive has no builder
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


def baseline_tree(ws: Path, rev: str) -> Path:
    """A copy of gitreg at `rev` (the baseline of the same run), to run from its dir."""
    tree = ws / "baseline"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(b.ROOT), "archive", rev, "gitreg"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def run(args: argparse.Namespace, ws: Path) -> str:
    start = time.perf_counter()
    src = b.synthetic_repo(ws / "src.git", files=args.files, tags=args.tags)
    made = time.perf_counter() - start
    base = baseline_tree(ws, args.baseline)
    from gitreg.archive_format import CLASSIC, fast_builder

    adds: dict[str, b.Finished] = {}
    for label, env, cwd in [
        (f"baseline ({args.baseline})", {}, base),
        ("now, archive_workers = 1", {"GITREG_ARCHIVE_WORKERS": "1"}, None),
        ("now (archive_workers = 0: one per core)", {}, None),
    ]:
        b.wait_quiet()
        b.progress(f"repo add: {label}")
        data = ws / f"data-{len(adds)}"
        done = b.gitreg_cli(
            data, "repo", "add", str(src.path), "--module", MODULE, env=env, cwd=cwd
        )
        b.require(f"{args.tags} published" in done.stdout, f"repo add: {done.stdout[-500:]}")
        adds[label] = done
    data, data_base = ws / "data-2", ws / "data-0"
    mirror = str(data / "git" / "1.git")
    blobs = [p for p in (data / "blobs" / "sha256").rglob("*") if p.is_file()]
    blobs_base = [p for p in (data_base / "blobs" / "sha256").rglob("*") if p.is_file()]

    samples = {}
    for label, builder, cwd in [
        ("baseline: tarfile + zlib 6", "", base),
        ("now, builder tar-pax+zlib-6 (headers written directly)", CLASSIC, None),
        (f"now, builder {fast_builder()}", fast_builder(), None),
    ]:
        b.wait_quiet()
        samples[label], _ = in_worker("archives", mirror, str(args.sample), builder, cwd=cwd)
    latencies = tag_to_listed(args, ws, src, data, data_base, base)
    return report(args, src, made, adds, blobs, blobs_base, samples, latencies)


def tag_to_listed(
    args: argparse.Namespace,
    ws: Path,
    src: b.SyntheticRepo,
    data: Path,
    base_data: Path,
    base: Path,
) -> list[list[Any]]:
    """`git tag`, then `gitreg sync MODULE` until the running server lists it (now); the
    baseline's `gitreg sync` of the same tag on its own data dir, timed alone."""
    tls = b.make_tls(ws / "tls")
    rows: list[list[Any]] = []
    with b.servers() as started:
        server = b.start_gitreg(data, tls, ws)
        started.append(server)
        for n in range(args.new_tags):
            commit = src.add_commit()
            name = f"v2.0.{n}"
            b.wait_quiet()
            t0 = time.perf_counter()
            b.tag(src.path, name, commit)
            synced = b.gitreg_cli(data, "sync", MODULE)
            listed = wait_listed(server, tls, name.lstrip("v"), deadline_s=60)
            downloaded = download(server, tls, name.lstrip("v"))
            total = time.perf_counter() - t0
            b.wait_quiet()
            old = b.gitreg_cli(base_data, "sync", MODULE, cwd=base)
            b.require("1 published" in old.stdout, f"baseline sync: {old.stdout[-300:]}")
            rows.append([name, old.seconds, synced.seconds, listed, downloaded, total])
    return rows


def report(
    args: argparse.Namespace,
    src: b.SyntheticRepo,
    made: float,
    adds: dict[str, b.Finished],
    blobs: list[Path],
    blobs_base: list[Path],
    samples: dict[str, dict[str, Any]],
    latencies: list[list[Any]],
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
        sample_rows.append(
            [
                label,
                *(f"{statistics.mean(v):.3f}" for v in (build, read, gz, rest)),
                f"{statistics.mean(sample['archive_bytes']) / 1e6:.2f}",
            ]
        )
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
        "Tag to installable: `git tag`, `gitreg sync MODULE`, then poll the running server's"
        " versions answer every 20 ms, then `download` and the whole archive it points to"
        " (now); the baseline's `gitreg sync` of the same tag, timed alone:",
        "",
        b.table(
            [
                "tag",
                "baseline sync s",
                "now sync s",
                "then listed s",
                "then downloaded s",
                "now: tag to installable s",
            ],
            [[row[0], *(f"{v:.2f}" for v in row[1:])] for row in latencies],
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


def download(server: b.Server, tls: b.Tls, version: str) -> float:
    """Seconds for `download` (204 + X-Terraform-Get) and the archive it names."""
    start = time.perf_counter()
    status, headers, _ = b.fetch(server.url(f"/v1/modules/{MODULE}/{version}/download"), tls.ca)
    b.require(status == 204, f"download answered {status}")
    status, _, body = b.fetch(headers["X-Terraform-Get"], tls.ca)
    b.require(status == 200 and len(body) > 0, f"archive answered {status}")
    return time.perf_counter() - start


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

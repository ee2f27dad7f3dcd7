"""Deflate libraries and parallel archive builds, on the archives of bench/publish.py.

1. One archive's tar stream (the last tag of the synthetic 5,000-file repository)
   deflated by zlib (levels 6 and 1), zlib-ng (`zlib-ng` package, if installed) and
   ISA-L (`isal` package, gitreg's builder): seconds and bytes.
2. `--archives` whole archive builds (gitreg's `build_archive`, fast builder, to a
   hashing null sink) one after another, in 2 threads, and in 2 processes; and the
   deflate alone in 2 threads, to see how much each releases the GIL.

    python bench/deflate.py [--files 5000] [--archives 8]
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import gzip
import importlib.util
import io
import multiprocessing
import time
import zlib
from collections.abc import Callable
from functools import partial
from pathlib import Path

import benchlib as b


def _tags(mirror: Path) -> list[tuple[str, int]]:
    from gitreg.git.backend import DulwichBackend

    tags, _ = DulwichBackend().tags(mirror)
    return [(t.tree_sha, t.commit_time) for t in tags]


def build(mirror: str, tree: str, mtime: int) -> str:
    """One archive as gitreg builds new ones; its sha256."""
    from dulwich.repo import Repo

    from gitreg.archives.build import build_archive
    from gitreg.archives.format import fast_builder

    sink = b.NullSink()
    with Repo(mirror) as repo:
        build_archive(repo.object_store, tree.encode(), sink, mtime=mtime, builder=fast_builder())
    return sink.hash.hexdigest()


def _best(fn: Callable[[], object], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _four(
    fn: Callable[[bytes], bytes], data: bytes, pool: futures.ThreadPoolExecutor | None
) -> None:
    """Deflate `data` four times, here or in `pool`'s threads."""
    if pool is None:
        for _ in range(4):
            fn(data)
    else:
        list(pool.map(fn, [data] * 4))


def _compressors() -> dict[str, Callable[[bytes], bytes]]:
    found: dict[str, Callable[[bytes], bytes]] = {
        "zlib 6 (gitreg before, tar-pax+zlib-6)": lambda d: zlib.compress(d, 6),
        "zlib 1": lambda d: zlib.compress(d, 1),
    }
    if importlib.util.find_spec("zlib_ng"):
        from zlib_ng import zlib_ng

        found["zlib-ng 6"] = lambda d: zlib_ng.compress(d, 6)
        found["zlib-ng 1"] = lambda d: zlib_ng.compress(d, 1)
    if importlib.util.find_spec("isal"):
        from isal import isal_zlib

        found["isal 1 (gitreg now)"] = lambda d: isal_zlib.compress(d, 1)
        found["isal 3"] = lambda d: isal_zlib.compress(d, 3)
    return found


def run(args: argparse.Namespace, ws: Path) -> str:
    src = b.synthetic_repo(ws / "src.git", files=args.files, tags=max(args.archives, 2))
    tags = _tags(src.path)
    out = io.BytesIO()
    from dulwich.repo import Repo

    from gitreg.archives.build import build_archive

    with Repo(str(src.path)) as repo:
        build_archive(repo.object_store, tags[-1][0].encode(), out, mtime=tags[-1][1])
    tar = gzip.decompress(out.getvalue())
    rows: list[list[object]] = []
    base = 0.0
    for label, fn in _compressors().items():
        b.wait_quiet()
        seconds = _best(partial(fn, tar))
        base = base or seconds
        size = len(fn(tar))
        rows.append([label, f"{seconds:.3f}", f"{base / seconds:.1f}x", f"{size / 1e6:.2f}"])
    deflate = b.table(["deflate", "s", "vs zlib 6", "MB"], rows)

    mirror = str(src.path)
    jobs = tags[: args.archives]
    trees, mtimes = [t for t, _ in jobs], [m for _, m in jobs]
    one_by_one = _best(lambda: [build(mirror, t, m) for t, m in jobs], runs=1)
    par: list[list[object]] = [["one after another", f"{one_by_one:.2f}", "1.00x"]]
    with futures.ThreadPoolExecutor(2) as pool:
        seconds = _best(lambda: list(pool.map(build, [mirror] * len(jobs), trees, mtimes)), 1)
    par.append(["2 threads", f"{seconds:.2f}", f"{one_by_one / seconds:.2f}x"])
    context = multiprocessing.get_context("spawn")
    start = time.perf_counter()
    with futures.ProcessPoolExecutor(2, mp_context=context) as procs:
        list(procs.map(build, [mirror] * len(jobs), trees, mtimes))
    seconds = time.perf_counter() - start
    par.append(["2 processes (spawn included)", f"{seconds:.2f}", f"{one_by_one / seconds:.2f}x"])
    for label, fn in list(_compressors().items())[::2]:
        alone = _best(partial(_four, fn, tar, None), runs=1)
        with futures.ThreadPoolExecutor(2) as pool:
            both = _best(partial(_four, fn, tar, pool), runs=1)
        par.append([f"deflate x4, {label}: 2 threads", f"{both:.2f}", f"{alone / both:.2f}x"])
    return "\n".join(
        [
            "## Deflate and parallel builds",
            "",
            f"Machine: {b.machine_line()}",
            "",
            f"One archive's tar stream: {len(tar) / 1e6:.1f} MB ({args.files:,} files). Best of 3.",
            "",
            deflate,
            "",
            f"{len(jobs)} archive builds (fast builder) / 4 deflates of that stream:",
            "",
            b.table(["how", "s", "speed-up"], par),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5_000)
    parser.add_argument("--archives", type=int, default=8)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    with b.workspace("deflate", args.keep) as ws:
        print(run(args, ws))


if __name__ == "__main__":
    main()

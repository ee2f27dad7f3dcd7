"""dulwich (gitreg's backend) vs pygit2 (libgit2) on the same synthetic repository.

The repository is bench/publish.py's: 5,000 files, 200 tags. Compared, each step in a fresh
process (so import time is left out of the timing but every cache starts cold), median of
`--rounds`:

- clone: fetch every tag into an empty bare mirror, from a local path and over smart HTTP
  (`git http-backend` on 127.0.0.1, bench/githttp.py); dulwich runs gitreg's own
  `DulwichBackend.fetch` (also as it was before 2462b25, offering only branches as
  "haves"), pygit2 `Remote.fetch(["+refs/tags/*:refs/tags/*"])`;
- incremental fetch: one new commit and tag added upstream, fetched into that mirror;
- walk: read every tree and blob of the last tag's 5,000-file tree;
- archive: gitreg's `build_archive` for that tree, objects read through dulwich or through a
  small pygit2 adapter, to see how much of an archive build the git library decides.

The git CLI is a third column for scale. Results back docs/git-backend.md.

    python bench/git_backends.py [--files 5000] [--tags 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import benchlib as b
from dulwich.objects import ObjectID, ShaFile

BACKENDS = ("dulwich", "dulwich-heads-only", "pygit2", "git")
TAG_REFSPEC = "+refs/tags/*:refs/tags/*"


# --- what runs inside the fresh worker processes ------------------------------------------


def do_fetch(backend: str, url: str, mirror: str) -> None:
    if backend == "dulwich":
        from gitreg.git.backend import DulwichBackend

        DulwichBackend().fetch(url, Path(mirror))
    elif backend == "dulwich-heads-only":
        from gitreg.git.backend import DulwichBackend

        fetcher = DulwichBackend()
        fetcher._open_mirror = _heads_only(fetcher._open_mirror)  # type: ignore[method-assign]
        fetcher.fetch(url, Path(mirror))
    elif backend == "pygit2":
        import pygit2

        path = Path(mirror)
        repo = (
            pygit2.Repository(mirror)
            if (path / "objects").is_dir()
            else pygit2.init_repository(mirror, bare=True)
        )
        repo.remotes.create_anonymous(url).fetch([TAG_REFSPEC])
    else:
        raise ValueError(backend)


def _heads_only(open_mirror: Any) -> Any:
    """gitreg before 2462b25: dulwich's stock graph walker offers the remote only
    `refs/heads/*` as "haves"; a mirror has only tags, so it offered nothing and every
    fetch brought the whole repository again. Kept as a column to show what the
    mirror's tag commits as haves are worth."""
    import functools

    from dulwich.repo import Repo

    def opened(path: Path) -> Any:
        repo = open_mirror(path)
        repo.get_graph_walker = functools.partial(Repo.get_graph_walker, repo)
        return repo

    return opened


def iter_blobs(backend: str, repo_path: str, tree: str) -> tuple[int, int]:
    """(files, bytes) after reading every tree and blob under `tree`."""
    files = size = 0
    if backend == "dulwich":
        from dulwich.objects import Tree
        from dulwich.repo import Repo

        repo = Repo(repo_path)
        store = repo.object_store
        stack = [store[ObjectID(tree.encode())]]
        while stack:
            node = stack.pop()
            assert isinstance(node, Tree)
            for entry in node.iteritems():
                obj = store[entry.sha]
                if isinstance(obj, Tree):
                    stack.append(obj)
                else:
                    files += 1
                    size += len(obj.as_raw_string())
        repo.close()
    else:
        import pygit2

        repo2 = pygit2.Repository(repo_path)
        stack2 = [repo2[tree]]
        while stack2:
            node2 = stack2.pop()
            for entry2 in node2:
                obj2 = repo2[entry2.id]
                if obj2.type == pygit2.enums.ObjectType.TREE:
                    stack2.append(obj2)
                else:
                    files += 1
                    size += len(obj2.data)
    return files, size


class Pygit2Objects:
    """gitreg.archives.build's `ObjectSource` (objects by hex sha, as ShaFiles) on pygit2."""

    def __init__(self, path: str) -> None:
        import pygit2
        from dulwich.objects import Blob, Tree

        self._repo = pygit2.Repository(path)
        self._kinds = {pygit2.enums.ObjectType.TREE: Tree, pygit2.enums.ObjectType.BLOB: Blob}

    def __getitem__(self, sha: ObjectID) -> ShaFile:
        obj = self._repo[sha.decode()]
        return self._kinds[obj.type].from_raw_string(
            self._kinds[obj.type].type_num, obj.read_raw(), sha=sha
        )


def do_archive(backend: str, repo_path: str, tree: str) -> int:
    from dulwich.repo import Repo

    from gitreg.archives.build import build_archive

    sink = b.NullSink()
    if backend == "dulwich":
        repo = Repo(repo_path)
        report = build_archive(repo.object_store, tree.encode(), sink, mtime=0)
        repo.close()
    else:
        report = build_archive(Pygit2Objects(repo_path), tree.encode(), sink, mtime=0)
    return report.files


def worker(step: str, backend: str, *args: str) -> dict[str, Any]:
    # Imports happen before the clock starts; only the git work is timed.
    import dulwich.objects
    import dulwich.repo

    import gitreg.archives.build
    import gitreg.git.backend

    if backend.startswith("pygit2"):
        import pygit2

        del pygit2
    del dulwich, gitreg
    start = time.perf_counter()
    result: dict[str, Any] = {}
    if step == "fetch":
        do_fetch(backend, *args)
    elif step == "walk":
        result["files"], result["bytes"] = iter_blobs(backend, *args)
    elif step == "archive":
        result["files"] = do_archive(backend, *args)
    result["seconds"] = time.perf_counter() - start
    return result


# --- the parent ---------------------------------------------------------------------------


def measure(step: str, backend: str, *args: str) -> tuple[float, int | None]:
    """(seconds, peak RSS KiB or None) of one step in a fresh process, once it is quiet."""
    b.wait_quiet()
    if backend == "git":
        if step != "fetch":
            raise ValueError(step)
        url, mirror = args
        if not Path(mirror, "objects").is_dir():
            b.git(Path("/"), "init", "-q", "--bare", mirror)
        done = b.run_measured(["git", "-C", mirror, "fetch", "-q", url, TAG_REFSPEC])
        if done.returncode != 0:
            raise RuntimeError(done.stdout)
        return done.seconds, None  # git's own RSS leaves out its index-pack child
    command = [b.PYTHON, str(Path(__file__).resolve()), "--worker", step, backend, *args]
    done = b.run_measured(command)
    if done.returncode != 0:
        raise RuntimeError(done.stdout)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"]), done.maxrss_kib


def _objects_bytes(mirror: Path) -> int:
    return sum(p.stat().st_size for p in (mirror / "objects").rglob("*") if p.is_file())


def tags_of(mirror: Path) -> int:
    return len(b.git(mirror, "tag", "-l").split())


def run(args: argparse.Namespace, ws: Path) -> str:
    src = b.synthetic_repo(ws / "repos" / "src.git", files=args.files, tags=args.tags)
    port = b.free_port()
    http = b.spawn(
        "githttp",
        [
            b.PYTHON,
            str(b.BENCH_DIR / "githttp.py"),
            "--root",
            str(ws / "repos"),
            "--port",
            str(port),
        ],
        ws / "githttp.log",
        port,
        cpu=None,
    )
    remotes = {"local path": str(src.path), "smart HTTP": f"http://127.0.0.1:{port}/src.git"}
    times: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    peaks: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    sizes: dict[tuple[str, str], list[int]] = {}
    try:
        _wait_http(remotes["smart HTTP"])
        mirrors: dict[tuple[str, str], Path] = {}
        for round_no in range(args.rounds):
            for transport, url in remotes.items():
                for backend in BACKENDS:
                    mirror = ws / f"{backend}-{transport.split()[0]}-{round_no}.git"
                    seconds, peak = measure("fetch", backend, url, str(mirror))
                    b.require(tags_of(mirror) == args.tags, f"{backend} clone got every tag")
                    times[("clone", transport, backend)].append(seconds)
                    if peak:
                        peaks[("clone", transport, backend)].append(peak)
                    mirrors[(transport, backend)] = mirror
                    sizes[(transport, backend)] = [_objects_bytes(mirror)]
        for n in range(args.rounds):
            commit = src.add_commit()
            b.tag(src.path, f"v9.0.{n}", commit)
            for transport, url in remotes.items():
                for backend in BACKENDS:
                    mirror = mirrors[(transport, backend)]
                    seconds, peak = measure("fetch", backend, url, str(mirror))
                    b.require(tags_of(mirror) == args.tags + n + 1, f"{backend} got the new tag")
                    times[("fetch 1 new tag", transport, backend)].append(seconds)
                    if peak:
                        peaks[("fetch 1 new tag", transport, backend)].append(peak)
        for key, mirror in mirrors.items():
            sizes[key].append(_objects_bytes(mirror))
    finally:
        http.stop()
    tree = b.git(src.path, "rev-parse", f"{src.tags[-1]}^{{tree}}")
    for _ in range(args.rounds):
        for step in ("walk", "archive"):
            for backend in ("dulwich", "pygit2"):
                seconds, peak = measure(step, backend, str(src.path), tree)
                times[(step, "git-repacked source", backend)].append(seconds)
                if peak:
                    peaks[(step, "git-repacked source", backend)].append(peak)
    return report(args, src, times, peaks, sizes)


def _wait_http(url: str) -> None:
    deadline = time.monotonic() + b.STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        probe = subprocess.run(["git", "ls-remote", url], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError("githttp did not start")


def report(
    args: argparse.Namespace,
    src: b.SyntheticRepo,
    times: dict[tuple[str, str, str], list[float]],
    peaks: dict[tuple[str, str, str], list[int]],
    sizes: dict[tuple[str, str], list[int]],
) -> str:
    rows = []
    for step, where in dict.fromkeys(key[:2] for key in times):
        d = b.median(times[(step, where, "dulwich")])
        p = b.median(times[(step, where, "pygit2")])
        g = times.get((step, where, "git"))
        h = times.get((step, where, "dulwich-heads-only"))
        rows.append(
            [
                step,
                where,
                f"{d:.2f}",
                f"{b.median(h):.2f}" if h else "-",
                f"{p:.2f}",
                f"{b.median(g):.2f}" if g else "-",
                f"{d / p:.1f}x",
                f"{b.mib(b.median(peaks[(step, where, 'dulwich')]))}"
                f" / {b.mib(b.median(peaks[(step, where, 'pygit2')]))}",
            ]
        )
    return "\n".join(
        [
            "## Git backends: dulwich vs pygit2 (git CLI for scale)",
            "",
            f"Machine: {b.machine_line()}; git {b.git(Path('/'), 'version').split()[-1]}",
            "",
            f"Repository: {args.files:,} files, {args.tags} tags, tree"
            f" {src.tree_bytes / 1e6:.1f} MB, pack {src.pack_bytes / 1e6:.1f} MB. Each step in"
            f" a fresh process (imports not timed), median of {args.rounds}. Peak RSS is the"
            " worker process's VmHWM, interpreter and imports included.",
            "",
            b.table(
                [
                    "step",
                    "from",
                    "dulwich s (gitreg)",
                    "dulwich, heads-only haves s (before 2462b25)",
                    "pygit2 s",
                    "git CLI s",
                    "dulwich/pygit2",
                    "peak RSS MiB dulwich / pygit2",
                ],
                rows,
            ),
            "",
            f"Mirror size on disk (objects/) after the clone and after {args.rounds} one-tag"
            " fetches:",
            "",
            b.table(
                ["from", "backend", "after clone MB", "after the fetches MB"],
                [
                    [where, backend, f"{before / 1e6:.1f}", f"{after / 1e6:.1f}"]
                    for (where, backend), (before, after) in sizes.items()
                ],
            ),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5_000)
    parser.add_argument("--tags", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        sys.exit(0)
    with b.workspace("git-backends", args.keep) as ws:
        print(run(args, ws))


if __name__ == "__main__":
    main()

"""Archive download throughput: gitreg vs nginx (sendfile on) vs bare Starlette FileResponse.

The same 5 MB and 50 MB files (random bytes, i.e. incompressible like a .tar.gz) are put in
gitreg's blob store and served as `/archives/<sha256>.tar.gz` by:

- gitreg (`BlobFileResponse`: 64 KiB pieces read from the page cache on the event loop),
- a bare Starlette `FileResponse` with the default chunk size (64 KiB), same uvicorn settings,
- nginx, one worker, `sendfile on` (over TLS nginx cannot hand the file to the kernel without
  kTLS, so it reads and encrypts in user space, as a TLS-terminating proxy would).

All three use the same TLS certificate. One client, then 8 concurrent clients, over
HTTPS and over plain HTTP (`--schemes`; over HTTP nginx hands the file to the kernel
with sendfile). Target: gitreg >= 0.9x nginx's MB/s.
`--before DIR` adds a `before` row: `gitreg serve` from another source tree (e.g.
`git archive` of main) on the same data dir, measured in the same rounds.

    python bench/archives.py [--seconds 5] [--rounds 3] [--schemes https,http] [--before DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
from collections import defaultdict
from pathlib import Path

import benchlib as b
import metadata

SIZES = {"5 MB": 5_000_000, "50 MB": 50_000_000}
NAMES = ("before", "gitreg", "bare", "nginx")
CLIENTS = (1, 8)


def run(args: argparse.Namespace, ws: Path) -> str:
    from gitreg.storage.blobs import FileBlobStore

    tls = b.make_tls(ws / "tls")
    data = ws / "data"
    store = FileBlobStore(data / "blobs")
    root = ws / "nginx-root"
    (root / "archives").mkdir(parents=True)
    rng = random.Random(7)
    blobs: dict[str, str] = {}
    files = []
    for label, size in SIZES.items():
        stored = store.put_bytes(rng.randbytes(size))
        blobs[label] = stored.sha256
        os.link(store.path(stored.sha256), root / "archives" / f"{stored.sha256}.tar.gz")
        files.append(
            {
                "path": f"/archives/{stored.sha256}.tar.gz",
                "file": str(store.path(stored.sha256)),
                "media_type": "application/gzip",
            }
        )
    routes = ws / "routes.json"
    routes.write_text(json.dumps({"files": files}))
    out = [
        "## Archive downloads: gitreg vs bare Starlette FileResponse vs nginx",
        "",
        f"Machine: {b.machine_line()}",
        "",
        f"wrk -t1 -d{args.seconds}s, keep-alive, TLS (same cert) or plain HTTP; servers on"
        f" CPU 1, wrk on CPU 0; median of {args.rounds} interleaved rounds. MB/s is the"
        " aggregate over all clients (10^6 bytes); time per download is one whole GET as a"
        " client sees it. Server CPU s/GB is the server's user+system CPU per 10^9 bytes"
        " sent: near 1 GB/s the single wrk thread is the limit, and this column still"
        " tells the servers apart.",
    ]
    for scheme in args.schemes:
        results = _measure(args, ws, tls, data, routes, root, blobs, scheme)
        out += ["", f"### {scheme.upper()}", "", _render(results)]
        out += ["", b.contention_note(list(_all(results)))]
    return "\n".join(out)


def _measure(
    args: argparse.Namespace,
    ws: Path,
    tls: b.Tls,
    data: Path,
    routes: Path,
    root: Path,
    blobs: dict[str, str],
    scheme: str,
) -> dict[tuple[str, int, str], list[b.Load]]:
    results: dict[tuple[str, int, str], list[b.Load]] = defaultdict(list)
    with b.servers() as started:
        if args.before:
            before = Path(args.before).resolve()
            started.append(metadata.start_gitreg(data, tls, ws, scheme, "before", before))
        started.append(metadata.start_gitreg(data, tls, ws, scheme, "gitreg", None))
        started.append(metadata.start_bare(routes, tls, ws, scheme))
        started.append(metadata.start_nginx(root, tls, ws, scheme, ""))
        for server in started:
            for label, sha in blobs.items():
                _, _, body = b.fetch(server.url(f"/archives/{sha}.tar.gz"), tls.ca)
                b.require(hashlib.sha256(body).hexdigest() == sha, f"{server.name} {label}")
                b.wrk(server.url(f"/archives/{sha}.tar.gz"), seconds=1, connections=1)
        for _ in range(args.rounds):
            for label, sha in blobs.items():
                for clients in CLIENTS:
                    for server in started:
                        load = b.measure(
                            server,
                            f"/archives/{sha}.tar.gz",
                            seconds=args.seconds,
                            connections=clients,
                            timeout_s=60,
                        )
                        b.require(load.errors == 0 and load.non2xx == 0, f"{server.name} {label}")
                        b.require(load.requests > 0, f"{server.name} {label}: no download done")
                        results[(label, clients, server.name)].append(load)
    return results


def _render(results: dict[tuple[str, int, str], list[b.Load]]) -> str:
    rows = []
    for label in SIZES:
        for clients in CLIENTS:
            loads = {
                name: pick(results[(label, clients, name)])
                for name in NAMES
                if results[(label, clients, name)]
            }
            for name, load in loads.items():
                rows.append(
                    [
                        label,
                        clients,
                        name,
                        f"{load.mb_per_s:,.0f}",
                        f"{load.rps:.1f}",
                        f"{load.p50_ms:,.0f}",
                        f"{load.p99_ms:,.0f}",
                        f"{load.server_cpu_s / (load.bytes / 1e9):.2f}",
                        f"{load.mb_per_s / loads['bare'].mb_per_s:.2f}",
                        f"{load.mb_per_s / loads['nginx'].mb_per_s:.2f}",
                    ]
                )
    headers = [
        "file",
        "clients",
        "server",
        "MB/s",
        "downloads/s",
        "p50 ms/download",
        "p99 ms/download",
        "server CPU s/GB",
        "vs bare",
        "vs nginx",
    ]
    return b.table(headers, rows)


def _all(results: dict[tuple[str, int, str], list[b.Load]]) -> list[b.Load]:
    return [load for loads in results.values() for load in loads]


def pick(loads: list[b.Load]) -> b.Load:
    return sorted(loads, key=lambda load: load.mb_per_s)[len(loads) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--schemes", type=lambda text: text.split(","), default=["https", "http"])
    parser.add_argument("--before", help="a source tree to run as `before` alongside")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    with b.workspace("archives", args.keep) as ws:
        print(run(args, ws))


if __name__ == "__main__":
    main()

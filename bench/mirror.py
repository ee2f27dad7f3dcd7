"""Mirror pull-through: a cold miss against fetching directly.

A fake upstream provider registry (tests/support/fake_upstream.py: uvicorn over TLS,
in a thread of this process) serves one signed provider zip per size. In one run,
with curl as the only client, each round measures for each size:

- direct: the zip straight from the upstream's download URL;
- cold:   the same bytes through `gitreg serve`'s mirror for a version it has never
          seen (download metadata, SHA256SUMS + signature, the zip streamed while
          it arrives, its tail once its sha256 verified), as curl sees it; gitreg's
          CPU while curl waited;
- cold, until stored: the same, until a HEAD of the zip answers (it waits for the
          package to be stored: `h1:` after the last byte, fsync, the row); CPU
          all of it, so nothing falls into the next cell;
- warm:   the same mirror URL again (served from the blob store);
- hosted: a hosted archive of the same size, `/archives/<sha256>.tar.gz`;
- direct, registry order / cold, Terraform order: what `terraform init` does for
  one package against the origin (discovery, versions, download metadata,
  SHA256SUMS, its signature, the zip) and through the mirror (index.json, then a
  cold VERSION.json, which lists `zh:` from the verified SHA256SUMS once the
  zip is arriving and starts its fill, then the zip, which joins that fill);
  "until stored" as above;
- cold VERSION.json alone: that VERSION.json's GET of the same run, timed alone.

gitreg's CPU (server process, all threads) is read from /proc around each gitreg
cell: CPU s per GB is steadier than wall time on a shared machine.

Every version of a size is the same zip bytes under another version number, so each
round's cold miss is a real miss that costs the same. SHA256SUMS and its signature are
computed before the clock starts, as a real registry serves them from files.
`--before DIR` adds a second gitreg, run from another checkout's source (e.g.
`git archive COMMIT gitreg | tar -x -C DIR`), measured in the same rounds: its cold
miss and warm hit are the "before" rows. Targets: cold <= 1.1x direct, warm ~ hosted.

    python bench/mirror.py [--rounds 5] [--sizes 20,100] [--before DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import benchlib as b

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support

# --upstream-rate paces the zip in pieces of this size (without --upstream-piece).
RATE_PIECE = 64 * 1024

CURL = ["curl", "-sS", "--fail-with-body", "-o", "/dev/null", "-w", "%{time_total}"]


def curl(url: str, ca: Path, head: bool = False) -> float:
    """Seconds for one whole GET, or HEAD (new connection, body discarded)."""
    out = subprocess.run(
        [*CURL, *(["-I"] if head else []), "--cacert", str(ca), url],
        capture_output=True,
        timeout=300,
    )
    b.require(out.returncode == 0, f"{url}: {out.stderr.decode().strip()}")
    return float(out.stdout)


def timed(server: b.Server | None, urls: list[str], ca: Path) -> tuple[float, float]:
    """(seconds, server CPU seconds) of GETs of `urls` one after another."""
    cpu = b.cpu_seconds(server.pid) if server else 0.0
    seconds = sum(curl(url, ca) for url in urls)
    return seconds, (b.cpu_seconds(server.pid) - cpu if server else 0.0)


def cold(
    server: b.Server, urls: list[str], zip_url: str, ca: Path
) -> tuple[list[tuple[float, float]], tuple[float, float]]:
    """Cold GETs of `urls` one after another, each (seconds, server CPU seconds)
    while the client waited; then (seconds until the package is stored, CPU to
    then): a HEAD of the zip waits for that, so the work after the last byte
    (`h1:`, fsync, the row) is counted, and never falls into the next cell."""
    start = b.cpu_seconds(server.pid)
    cells, seconds = [], 0.0
    for url in urls:
        cells.append(timed(server, [url], ca))
        seconds += cells[-1][0]
    stored = curl(zip_url, ca, head=True)
    return cells, (seconds + stored, b.cpu_seconds(server.pid) - start)


def run(args: argparse.Namespace, ws: Path) -> str:
    from gitreg.storage.blobs import FileBlobStore
    from tests.support.fake_upstream import FakeRelease, FakeUpstream, serve_tls
    from tests.support.provider_dist import provider_zip

    class StaticUpstream(FakeUpstream):
        """The fake computes SHA256SUMS (hashing every zip) and signs it per request;
        a real registry serves them as files: computed once here, as theirs are."""

        def _shasums(self, type_: str, release: FakeRelease) -> bytes:
            key = ("sums", type_, release.version)
            if key not in documents:
                documents[key] = super()._shasums(type_, release)
            return documents[key]

        async def _gated(self, data: bytes) -> AsyncIterator[bytes]:
            # --upstream-piece: the zip in pieces, each written once the last one
            # drained, as a server streaming a file sends it; without it the fake
            # writes the whole body at once (uvloop encrypts all of it before the
            # first byte leaves)
            piece = args.upstream_piece * 1024 or RATE_PIECE
            began = time.perf_counter()
            for start in range(0, len(data), piece):
                if args.upstream_rate:  # --upstream-rate: at most that many MB/s, as a link
                    await asyncio.sleep(
                        began + start / (args.upstream_rate * 1e6) - time.perf_counter()
                    )
                yield data[start : start + piece]

        def _signature(self, type_: str, release: FakeRelease) -> bytes:
            key = ("sig", type_, release.version)
            if key not in documents:
                documents[key] = super()._signature(type_, release)
            return documents[key]

    documents: dict[tuple[str, str, str], bytes] = {}
    rng = random.Random(16)
    fake = StaticUpstream()
    if args.upstream_piece or args.upstream_rate:
        fake.gate = threading.Event()  # set: _gated streams the zip without waiting
        fake.gate.set()
    store = FileBlobStore(ws / "data" / "blobs")
    zips: dict[int, bytes] = {}
    hosted: dict[int, str] = {}
    for mb in args.sizes:
        b.progress(f"building a {mb} MB zip")
        zips[mb] = provider_zip(f"big{mb}", "1.0.0", rng.randbytes(mb * 1_000_000))
        hosted[mb] = store.put_bytes(rng.randbytes(len(zips[mb]))).sha256
        fake.providers[("hashicorp", f"big{mb}")] = {
            f"1.0.{i}": FakeRelease(f"1.0.{i}", {"linux_amd64": zips[mb]})
            for i in range(2 * (args.rounds + 1))  # a cold zip and a cold VERSION.json each round
        }
    tls = b.make_tls(ws / "tls")
    times: dict[tuple[int, str], list[tuple[float, float]]] = {}
    with serve_tls(fake, ws / "upstream-tls") as served, b.servers() as started:
        env = {
            "GITREG_UPSTREAM": f"registry.terraform.io={served.url}",
            "GITREG_MIRROR_PLATFORMS": "linux_amd64",
            "SSL_CERT_FILE": str(served.ca_pem),
            "PYTHONPATH": str(ROOT),
        }
        gitreg = b.start_gitreg(ws / "data", tls, ws, "warning", env=env)
        started.append(gitreg)
        before = None
        if args.before:
            before_env = {**env, "PYTHONPATH": str(args.before)}
            before = b.start_gitreg(
                ws / "before", tls, ws, "warning", env=before_env, name="before"
            )
            started.append(before)
        for mb in args.sizes:  # what a real registry has ready before anyone asks
            for release in fake.providers[("hashicorp", f"big{mb}")].values():
                fake._signature(f"big{mb}", release)
        for i in range(args.rounds + 1):  # round 0 warms up and is not counted
            for mb in args.sizes:
                took = measure_round(args, i, mb, served, gitreg, before, hosted[mb], tls.ca)
                b.progress(
                    f"round {i} {mb} MB: " + ", ".join(f"{k} {v[0]:.3f}s" for k, v in took.items())
                )
                if i:
                    for kind, seconds in took.items():
                        times.setdefault((mb, kind), []).append(seconds)
    return _render(args, zips, times) + "\n\n" + local_passes(args, ws, zips)


def measure_round(
    args: argparse.Namespace,
    i: int,
    mb: int,
    served: Any,
    gitreg: b.Server,
    before: b.Server | None,
    hosted: str,
    ca: Path,
) -> dict[str, tuple[float, float]]:
    """One round's cells for one size: (seconds, gitreg CPU seconds) by kind."""
    version, later = f"1.0.{i}", f"1.0.{args.rounds + 1 + i}"
    name = f"terraform-provider-big{mb}_{version}_linux_amd64.zip"
    files = f"{served.url}/files/hashicorp/big{mb}"
    base = f"/mirror/registry.terraform.io/hashicorp/big{mb}"
    registry = f"{served.url}/v1/providers/hashicorp/big{mb}"
    direct_order = [
        f"{served.url}/.well-known/terraform.json",
        f"{registry}/versions",
        f"{registry}/{later}/download/linux/amd64",
        f"{files}/{later}/SHA256SUMS",
        f"{files}/{later}/SHA256SUMS.sig",
        f"{files}/{later}/terraform-provider-big{mb}_{later}_linux_amd64.zip",
    ]
    mirror_order = [
        f"{base}/index.json",
        f"{base}/{later}.json",
        f"{base}/terraform-provider-big{mb}_{later}_linux_amd64.zip",
    ]
    took = {"direct": timed(None, [f"{files}/{version}/{name}"], served.ca_pem)}
    for label, server in (("before", before), ("", gitreg)):
        if server is None:
            continue
        suffix = f" {label}" if label else ""
        url = server.url(f"{base}/{name}")
        (took["cold" + suffix],), took["cold, until stored" + suffix] = cold(server, [url], url, ca)
        took["warm" + suffix] = timed(server, [url], ca)
    took["hosted"] = timed(gitreg, [gitreg.url(f"/archives/{hosted}.tar.gz")], ca)
    took["direct, registry order"] = timed(None, direct_order, served.ca_pem)
    for label, server in (("before", before), ("", gitreg)):
        if server is not None:
            suffix = f" {label}" if label else ""
            # Each GET timed alone too: the cold VERSION.json is what Terraform
            # waits for before it asks for the zip.
            urls = [server.url(p) for p in mirror_order]
            (index, version_json, zip_), stored = cold(server, urls, urls[-1], ca)
            took["cold, Terraform order" + suffix] = (
                index[0] + version_json[0] + zip_[0],
                index[1] + version_json[1] + zip_[1],
            )
            took["cold, Terraform order, until stored" + suffix] = stored
            took["cold VERSION.json alone" + suffix] = version_json
    return took


def local_passes(args: argparse.Namespace, ws: Path, zips: dict[int, bytes]) -> str:
    """In process, no network: the work between the zip's last byte arriving and the
    package being stored, as it was (hash the scratch file again and unzip it for h1
    in `inspect_package`, then copy it into the store), one pass (unzip for h1
    inside the blob writer, then rename: a fill a client reads, after the bytes went
    out), and with the member hashes taken as the bytes were written (read the
    central directory, then rename: `gitreg mirror sync`)."""
    from gitreg.providers.package import PackageLimits, inspect_package
    from gitreg.providers.zipstream import StreamedMembers
    from gitreg.storage.blobs import FileBlobStore, StoredBlob

    limits = PackageLimits(2**31, 2**33, 1000)
    rows = []
    for mb, data in zips.items():
        took: dict[str, list[float]] = {
            "three passes (before)": [],
            "one pass (now, a fill a client reads: after its last byte went out)": [],
            "central directory only (`gitreg mirror sync`: h1 streamed)": [],
        }
        for i in range(args.rounds):
            store = FileBlobStore(ws / f"passes-{mb}-{i}")
            scratch = ws / f"scratch-{mb}-{i}.zip"
            scratch.write_bytes(data)
            start = time.perf_counter()
            inspect_package(scratch, f"big{mb}", "linux", limits)
            with store.writer() as sink, scratch.open("rb") as source:
                while chunk := source.read(1024 * 1024):
                    sink.write(chunk)
            took["three passes (before)"].append(time.perf_counter() - start)
            store = FileBlobStore(ws / f"passes-now-{mb}-{i}")
            type_ = f"big{mb}"

            def check(path: Path, blob: StoredBlob, type_: str = type_) -> None:
                inspect_package(path, type_, "linux", limits, blob.sha256)

            with store.writer(check) as sink:
                sink.write(data)  # as the body arrives: hashed on the way in
                start = time.perf_counter()
            took["one pass (now, a fill a client reads: after its last byte went out)"].append(
                time.perf_counter() - start
            )
            store = FileBlobStore(ws / f"passes-streamed-{mb}-{i}")
            members = StreamedMembers(limits.max_unpacked_bytes, limits.max_files)

            def streamed(
                path: Path, blob: StoredBlob, type_: str = type_, fed: StreamedMembers = members
            ) -> None:
                inspect_package(path, type_, "linux", limits, blob.sha256, fed)

            with store.writer(streamed) as sink:
                sink.write(data)  # as the body arrives: hashed and unzipped on the way in
                members.feed(data)
                start = time.perf_counter()
            took["central directory only (`gitreg mirror sync`: h1 streamed)"].append(
                time.perf_counter() - start
            )
        for label, seconds in took.items():
            rows.append([f"{len(data) / 1e6:.0f} MB", label, f"{b.median(seconds):.3f}"])
    return "\n".join(
        [
            "### After the last byte: verification and storing, in process",
            "",
            f"Median of {args.rounds}; fsync included (same disk as the blob store).",
            "",
            b.table(["zip", "work", "median s"], rows),
        ]
    )


def _render(
    args: argparse.Namespace,
    zips: dict[int, bytes],
    times: dict[tuple[int, str], list[tuple[float, float]]],
) -> str:
    rows = []
    for mb in args.sizes:
        size = len(zips[mb])
        kinds = [kind for (size_mb, kind) in times if size_mb == mb]
        medians = {kind: b.median([t for t, _ in times[(mb, kind)]]) for kind in kinds}
        for kind in kinds:
            cpu = b.median([c for _, c in times[(mb, kind)]])
            against = "direct, registry order" if "order" in kind else "direct"
            rows.append(
                [
                    f"{size / 1e6:.0f} MB",
                    kind,
                    f"{medians[kind]:.3f}",
                    f"{size / 1e6 / medians[kind]:,.0f}",
                    f"{medians[kind] / medians[against]:.2f}",
                    f"{medians[kind] / medians['hosted']:.2f}",
                    "-" if kind.startswith("direct") else f"{cpu / (size / 1e9):.2f}",
                ]
            )
    headers = ["zip", "fetch", "median s", "MB/s", "vs direct", "vs hosted", "gitreg CPU s/GB"]
    return "\n".join(
        [
            "## Mirror: cold miss and warm hit vs a direct fetch and a hosted archive",
            "",
            f"Machine: {b.machine_line()}",
            "",
            f"curl, one GET per cell over TLS, new connection each; median of {args.rounds}"
            " interleaved rounds after one warm-up round. gitreg on CPU 1; the upstream"
            " (uvicorn, in the bench process) and curl unpinned. The two 'order' rows are"
            " several GETs in sequence, compared with each other."
            + _upstream_line(args)
            + (
                " The machine was shared (GITREG_BENCH_NO_WAIT=1): timings are noisy."
                if os.environ.get("GITREG_BENCH_NO_WAIT")
                else ""
            ),
            "",
            b.table(headers, rows),
        ]
    )


def _upstream_line(args: argparse.Namespace) -> str:
    """How the upstream sent each zip, as the table's reader needs to know."""
    piece = f"{args.upstream_piece} KiB" if args.upstream_piece else "64 KiB"
    if args.upstream_rate:
        return f" The upstream sent each zip at {args.upstream_rate:g} MB/s, in {piece} pieces."
    if args.upstream_piece:
        return f" The upstream streamed each zip in {piece} writes."
    return " The upstream wrote each zip in one write."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--sizes", type=lambda text: [int(s) for s in text.split(",")], default=[20, 100]
    )
    parser.add_argument("--before", type=Path, help="another checkout's source to compare")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--upstream-piece",
        type=int,
        default=0,
        metavar="KIB",
        help="the upstream streams each zip in pieces of KIB (default: one write)",
    )
    parser.add_argument(
        "--upstream-rate",
        type=float,
        default=0.0,
        metavar="MB_PER_S",
        help="the upstream sends each zip at most this fast, as over a link of that speed"
        " (pieces of --upstream-piece KIB, or 64 KiB)",
    )
    args = parser.parse_args()
    os.environ.setdefault("GITREG_JOB_WORKERS", "0")
    with b.workspace("mirror", args.keep) as ws:
        # `python -m gitreg` looks in its working directory first: run both servers
        # from one without a gitreg, so each gets the source its PYTHONPATH names.
        os.chdir(ws)
        print(run(args, ws))


if __name__ == "__main__":
    main()

"""Webhook storm: answer latency of 500 concurrent GitHub push deliveries.

Target: p99 under 1 s at 500 concurrent deliveries on one worker,
with every 2xx'd delivery stored before its answer. GitHub gives up after 10 s.

    python bench/webhooks.py [--deliveries 500] [--repos 20] [--rounds 3]

Servers (each pinned to CPU 1, over TLS with gitreg's local CA, like `gitreg serve` as
installed; the client runs in this process, pinned to CPU 0):

- gitreg: `python -m gitreg serve`, one worker, the default 4 job threads, `--repos`
  registered repositories (tiny real git repositories, one module each), a webhook
  secret. Jobs made by one round really run (fetch, publish) during the next ones.
- bare+fsync: a bare Starlette app under uvicorn (same options) that checks the
  signature, parses the JSON and answers 202 after one `INSERT OR IGNORE` in its own
  `BEGIN IMMEDIATE` transaction (WAL, `synchronous = FULL`, so one fsync per request)
  on one connection behind a lock, from Starlette's thread pool: what a naive handler
  that stores each delivery before answering costs.
- bare: the same app answering without touching the database (the floor).

A round opens one TLS connection per delivery first (handshakes are not measured),
then writes every request at once and times each from its write to its full answer.
About 30% of the deliveries repeat an earlier delivery id of the same round (a forge
redelivering), with the same body and signature. After the round the deliveries table
is read: every delivery id answered 2xx must be in it, stored once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import random
import signal
import sqlite3
import ssl
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import benchlib as b

SECRET = "bench-webhook-secret"  # noqa: S105 (a made-up secret for the bench)
ROUND_TIMEOUT = 120.0  # a round that takes longer is reported as failed, not waited for


# --- the baseline server ------------------------------------------------------------------


def serve_baseline(port: int, cert: str, key: str, db: str) -> None:
    """bare (db == "") or bare+fsync: see the module docstring."""
    import threading

    import uvicorn
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    conn = sqlite3.connect(db or ":memory:", isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS deliveries (id TEXT PRIMARY KEY, body BLOB)")
    lock = threading.Lock()

    def store(delivery_id: str, body: bytes) -> None:
        with lock:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT OR IGNORE INTO deliveries VALUES (?, ?)", (delivery_id, body))
            conn.execute("COMMIT")

    async def receive(request: Request) -> Response:
        body = await request.body()
        mac = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(mac, request.headers.get("x-hub-signature-256", "")):
            return Response(b'{"errors": ["signature"]}', 401, media_type="application/json")
        json.loads(body)
        if db:
            await run_in_threadpool(store, request.headers["x-github-delivery"], body)
        return Response(b'{"status": "queued"}', 202, media_type="application/json")

    async def ready(request: Request) -> Response:
        return Response(status_code=204)

    app = Starlette(
        routes=[Route("/webhooks/github", receive, methods=["POST"]), Route("/__ready", ready)]
    )
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="info",
        access_log=False,  # as gitreg is run here
        server_header=False,
        proxy_headers=False,
        forwarded_allow_ips=None,
        timeout_graceful_shutdown=10,
        ssl_certfile=cert,
        ssl_keyfile=key,
    )


def slow_disk(command: list[str], fsync_ms: float) -> list[str]:
    """Every fsync/fdatasync of the server delayed by `fsync_ms` (strace fault
    injection, seccomp-filtered so no other syscall is slowed): a disk like a cloud
    volume or a spinning disk, where an fsync takes milliseconds, not microseconds."""
    if fsync_ms <= 0:
        return command
    delay = f"inject=fsync,fdatasync:delay_exit={int(fsync_ms * 1000)}"
    trace = ["strace", "-f", "--seccomp-bpf", "-qq", "-o", "/dev/null", "-e"]
    return [*trace, "trace=fsync,fdatasync", "-e", delay, *command]


def stop(server: b.Server) -> None:
    """The server itself first: strace, on SIGTERM, detaches and leaves it running."""
    with contextlib.suppress(OSError, ValueError):
        children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
        for child in children:
            os.kill(int(child), signal.SIGTERM)
    server.stop()


def start(name: str, command: list[str], ready: str, tls: b.Tls, log_dir: Path) -> b.Server:
    port = int(command[command.index("--port") + 1])
    server = b.spawn(name, command, log_dir / f"{name}-{port}.log", port)
    b.wait_https(server, ready, tls.ca)
    return server


def start_baseline(name: str, db: str, tls: b.Tls, log_dir: Path, fsync_ms: float) -> b.Server:
    port = str(b.free_port())
    command = [b.PYTHON, __file__, "--serve-baseline", "--port", port, str(tls.cert)]
    return start(name, slow_disk([*command, str(tls.key), db], fsync_ms), "/__ready", tls, log_dir)


def start_gitreg(data_dir: Path, tls: b.Tls, log_dir: Path, fsync_ms: float) -> b.Server:
    command = [b.PYTHON, "-m", "gitreg", "serve", "--data-dir", str(data_dir), "--port"]
    command += [str(b.free_port()), "--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
    return start("gitreg", slow_disk(command, fsync_ms), "/healthz", tls, log_dir)


# --- gitreg -------------------------------------------------------------------------------


def forge_name(number: int) -> str:
    return f"acme/terraform-null-storm{number}"


def prepare_gitreg(work: Path, repos: int) -> Path:
    """A data dir with `repos` registered repositories, each a real one-tag module."""
    from gitreg.settings import load_settings
    from gitreg.storage.index import SQLiteIndex

    data_dir = work / "data"
    index = SQLiteIndex(load_settings({"data_dir": data_dir}, environ={}).db_path)
    for number in range(repos):
        path = work / "remotes" / f"storm{number}"
        path.mkdir(parents=True)
        b.git(path, "init", "-q", "-b", "main")
        (path / "main.tf").write_text(f'output "n" {{ value = {number} }}\n')
        b.git(path, "add", "main.tf")
        b.git(path, "commit", "-q", "-m", "module")
        b.git(path, "tag", "v1.0.0")
        record = index.add_repo(str(path), forge_name(number), SECRET)
        index.add_module(record.id, "acme", f"storm{number}", "null", "", "")
    index.close()
    return data_dir


# --- the storm ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    delivery_id: str
    request: bytes


def push_body(rng: random.Random, repo: str, tag: str) -> bytes:
    """A GitHub tag push payload of realistic size (~7 KB: repository, pusher, sender)."""
    owner, _, name = repo.partition("/")
    user = {"login": owner, "id": 1, "type": "Organization", "site_admin": False}
    user |= {f"{k}_url": f"https://api.github.com/users/{owner}/{k}" for k in range(8)}
    repository = {"id": rng.randrange(10**8), "name": name, "full_name": repo, "owner": user}
    repository |= {f"{k}_url": f"https://api.github.com/repos/{repo}/{k}" for k in range(40)}
    payload = {
        "ref": f"refs/tags/{tag}",
        "before": "0" * 40,
        "after": f"{rng.getrandbits(160):040x}",
        "created": True,
        "deleted": False,
        "forced": False,
        "base_ref": "refs/heads/main",
        "compare": f"https://github.com/{repo}/compare/{tag}",
        "commits": [],
        "head_commit": {"id": f"{rng.getrandbits(160):040x}", "message": "release " + tag},
        "repository": repository,
        "pusher": {"name": owner, "email": f"{owner}@example.com"},
        "sender": user,
    }
    return json.dumps(payload, indent=2).encode()


def http_request(port: int, delivery_id: str, body: bytes) -> bytes:
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    head = (
        f"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "User-Agent: GitHub-Hookshot/bench\r\nContent-Type: application/json\r\n"
        f"X-GitHub-Event: push\r\nX-GitHub-Delivery: {delivery_id}\r\n"
        f"X-Hub-Signature-256: {signature}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def storm(rng: random.Random, port: int, count: int, repos: int) -> list[Delivery]:
    """`count` deliveries; about 30% repeat an earlier one byte for byte."""
    made: list[Delivery] = []
    for number in range(count):
        if made and rng.random() < 0.3:
            made.append(rng.choice(made))
            continue
        delivery_id = str(uuid.UUID(int=rng.getrandbits(128)))
        body = push_body(rng, forge_name(number % repos), f"v1.{number}.0")
        made.append(Delivery(delivery_id, http_request(port, delivery_id, body)))
    return made


@dataclass
class Round:
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    accepted: set[str] = field(default_factory=set)  # delivery ids answered 2xx
    errors: int = 0
    foreign_cores: float = 0.0


async def _answer(reader: asyncio.StreamReader) -> int:
    status = int((await reader.readline()).split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def _fire(port: int, ca: Path, deliveries: list[Delivery], result: Round) -> None:
    context = ssl.create_default_context(cafile=str(ca))
    handshakes = asyncio.Semaphore(32)

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        async with handshakes:
            return await asyncio.open_connection("127.0.0.1", port, ssl=context)

    streams = await asyncio.gather(*(connect() for _ in deliveries))
    start = asyncio.Event()

    async def one(
        delivery: Delivery, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await start.wait()
        began = time.perf_counter()
        try:
            writer.write(delivery.request)
            await writer.drain()
            status = await _answer(reader)
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
            result.errors += 1
            return
        finally:
            writer.close()
        result.latencies.append(time.perf_counter() - began)
        result.statuses[status] = result.statuses.get(status, 0) + 1
        if 200 <= status < 300:
            result.accepted.add(delivery.delivery_id)

    tasks = [
        asyncio.create_task(one(d, r, w)) for d, (r, w) in zip(deliveries, streams, strict=True)
    ]
    await asyncio.sleep(0.2)  # every task is waiting on `start`
    start.set()
    await asyncio.wait_for(asyncio.gather(*tasks), ROUND_TIMEOUT)


def run_round(server: b.Server, ca: Path, deliveries: list[Delivery]) -> Round:
    result = Round()
    b.wait_quiet(max_wait=20)
    server_cpu, client_cpu = b.cpu_seconds(server.pid), time.process_time()
    busy, began = b._machine_busy(), time.perf_counter()
    asyncio.run(_fire(server.port, ca, deliveries, result))
    wall = time.perf_counter() - began
    ours = b.cpu_seconds(server.pid) - server_cpu + time.process_time() - client_cpu
    # Other processes' CPU during the round (someone's test suite on a shared machine).
    result.foreign_cores = max(0.0, (b._machine_busy() - busy - ours) / wall)
    return result


def stored_ids(db: Path, table: str, column: str) -> list[str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return [r[0] for r in conn.execute(f"SELECT {column} FROM {table}")]  # noqa: S608


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def summary(name: str, rounds: list[Round], stored: int, expected: int) -> list[object]:
    def ms(value: float) -> str:
        return f"{value * 1000:,.0f}"

    middle = sorted(rounds, key=lambda r: percentile(r.latencies, 0.99))[len(rounds) // 2]
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(middle.statuses.items()))
    return [
        name,
        ms(statistics.median(middle.latencies)),
        ms(percentile(middle.latencies, 0.99)),
        ms(max(middle.latencies)),
        statuses + (f", errors: {middle.errors}" if middle.errors else ""),
        f"{stored} / {expected}",
        f"{max(r.foreign_cores for r in rounds):.2f}",
    ]


def measure(
    name: str, server: b.Server, ca: Path, args: argparse.Namespace, db: Path, table: str
) -> list[object]:
    rng = random.Random("storm")  # the same deliveries for every server
    rounds: list[Round] = []
    accepted: set[str] = set()
    for number in range(args.rounds):
        deliveries = storm(rng, server.port, args.deliveries, args.repos)
        done = run_round(server, ca, deliveries)
        rounds.append(done)
        accepted |= done.accepted
        b.progress(
            f"{name} round {number + 1}: p50 {statistics.median(done.latencies):.3f}s"
            f" p99 {percentile(done.latencies, 0.99):.3f}s max {max(done.latencies):.3f}s"
            f" {done.statuses} errors {done.errors}"
        )
    column = "delivery_id" if table == "deliveries" and name == "gitreg" else "id"
    if not table:
        return summary(name, rounds, 0, 0)
    ids = stored_ids(db, table, column)
    b.require(len(ids) == len(set(ids)), f"{name}: a delivery id is stored twice")
    b.require(accepted <= set(ids), f"{name}: {len(accepted - set(ids))} 2xx'd ids not stored")
    return summary(name, rounds, len(accepted & set(ids)), len(accepted))


def main() -> None:
    if len(sys.argv) == 7 and sys.argv[1] == "--serve-baseline":
        serve_baseline(int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6])
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--deliveries", type=int, default=500)
    parser.add_argument("--repos", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--fsync-ms",
        type=float,
        default=[0.0, 10.0],
        nargs="+",
        help="run everything once per value, each fsync delayed that long (0: this disk)",
    )
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    b.require(0 < args.deliveries <= 1000, "--deliveries must be 1..1000 (open files)")
    if len(os.sched_getaffinity(0)) > 1:  # the client on its own core
        os.sched_setaffinity(0, {int(b.CLIENT_CPU)})
    for fsync_ms in args.fsync_ms:
        rows = run_all(args, fsync_ms)
        disk = "this VM's disk" if fsync_ms <= 0 else f"every fsync delayed {fsync_ms:g} ms"
        print(
            f"\n{args.deliveries} concurrent GitHub push deliveries (~30% repeated ids),"
            f" {args.repos} repositories, one worker, TLS, {disk}; median of {args.rounds}"
            " rounds by p99. Latency in ms, from writing the request to reading the answer.\n"
        )
        headers = ["server", "p50", "p99", "max", "answers", "2xx'd ids stored", "other cores"]
        print(b.table(headers, rows), flush=True)
    print(b.machine_line())


def run_all(args: argparse.Namespace, fsync_ms: float) -> list[list[object]]:
    rows = []
    with b.workspace("webhooks", args.keep) as work, b.servers() as started:
        tls = b.make_tls(work / "tls")
        b.progress(f"registering {args.repos} repositories")
        data_dir = prepare_gitreg(work, args.repos)
        os.environ |= {"GITREG_WEBHOOK_SECRET": SECRET, "GITREG_ACCESS_LOG": "false"}
        gitreg = start_gitreg(data_dir, tls, work, fsync_ms)
        started.append(gitreg)
        db = data_dir / "index.sqlite3"
        rows.append(measure("gitreg", gitreg, tls.ca, args, db, "deliveries"))
        stop(gitreg)
        bare_db = work / "bare.sqlite3"
        fsync = start_baseline("bare+fsync", str(bare_db), tls, work, fsync_ms)
        started.append(fsync)
        rows.append(measure("bare+fsync", fsync, tls.ca, args, bare_db, "deliveries"))
        stop(fsync)
        bare = start_baseline("bare", "", tls, work, fsync_ms)
        started.append(bare)
        rows.append(measure("bare", bare, tls.ca, args, bare_db, ""))
        stop(bare)
    return rows


if __name__ == "__main__":
    main()

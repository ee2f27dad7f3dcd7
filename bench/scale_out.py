"""Scale-out: gitreg on SQLite vs PostgreSQL, one replica vs three, S3 downloads.

One run measures, side by side:

1. cached metadata (discovery, versions, download) of one `gitreg serve` on SQLite vs one
   on PostgreSQL, same module, wrk; target: PostgreSQL within 5% of SQLite. PostgreSQL's
   own CPU (postmaster and backends) per request is shown too: ~0 when the cache works;
2. publish throughput: `--repos` repositories x `--tags` tags, one signed webhook per
   tag posted at once, drained by one replica vs three (separate data dirs, one
   PostgreSQL database, one S3 bucket): versions published per second;
3. webhook-to-installable latency: a tag pushed, its webhook posted to replica 1, time
   until replica 3 lists the version and serves its download and archive;
4. archive download MB/s of a ~`--archive-mb` MB archive from S3: `blob_downloads=stream`
   (gitreg relays the bytes) vs `redirect` (curl follows the 302 to a presigned URL).

    python bench/scale_out.py [--seconds 5] [--rounds 3] [--repos 30] [--tags 3]

PostgreSQL is Debian's server (tests/support/postgres.py starts it, fsync off); S3 is
moto's server mode in a subprocess (no S3 server installs from the registries here), so
the S3 numbers are moto's. Servers are pinned to CPU 1 and wrk/curl to CPU 0 in parts 1
and 4; in parts 2 and 3 nothing is pinned (three replicas share the machine's cores).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import secrets
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import benchlib as b
import psycopg
from metadata import VERSIONS, endpoints

sys.path.insert(0, str(b.ROOT))  # tests.support: the PostgreSQL server and webhook fixtures
from tests.support.postgres import PostgresServer, start_postgres
from tests.support.webhooks import delivery

MODULE = "acme/bench/aws"
SECRET = "bench-scale-out-secret"  # noqa: S105 (a made-up webhook secret)


# --- the shared engines ---------------------------------------------------------------------


@dataclass
class Moto:
    server: b.Server

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def bucket(self, name: str) -> dict[str, str]:
        """A new bucket, and the variables that make gitreg use it."""
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        urllib.request.urlopen(request, timeout=10).close()
        return {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.endpoint,
            "GITREG_BLOB_STORE": f"s3://{name}/registry",
            "GITREG_S3_ADDRESSING": "path",
        }


def start_moto(ws: Path) -> Moto:
    port = b.free_port()
    command = [b.PYTHON, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    server = b.spawn("moto", command, ws / "moto.log", port)
    deadline = time.monotonic() + b.STARTUP_TIMEOUT
    while True:
        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).close()
            return Moto(server)
        b.require(time.monotonic() < deadline and server.process.poll() is None, "moto starts")
        time.sleep(0.1)


@dataclass
class Engines:
    ws: Path
    tls: b.Tls
    postgres: PostgresServer
    moto: Moto
    key_file: Path

    def env(self, s3: bool) -> dict[str, str]:
        """A fresh PostgreSQL database (and with `s3`, a fresh bucket) for one setup."""
        env = {
            "GITREG_DATABASE_URL": self.postgres.create_database().url,
            "GITREG_SECRET_KEY_FILE": str(self.key_file),
        }
        if s3:
            env |= self.moto.bucket(f"bench-{secrets.token_hex(4)}")
        return env

    @property
    def postgres_pid(self) -> int:
        assert self.postgres.process is not None
        return self.postgres.process.pid


@contextlib.contextmanager
def engines(ws: Path) -> Iterator[Engines]:
    tls = b.make_tls(ws / "tls")
    key_file = ws / "secret.key"
    key_file.write_text(secrets.token_hex(32) + "\n")
    key_file.chmod(0o600)
    postgres = start_postgres(ws)
    moto = None
    try:
        moto = start_moto(ws)
        yield Engines(ws, tls, postgres, moto, key_file)
    finally:
        if moto is not None:
            moto.server.stop()
        postgres.close()


def sql(env: dict[str, str], query: str) -> list[tuple[object, ...]]:
    with psycopg.connect(env["GITREG_DATABASE_URL"]) as conn:
        return list(conn.execute(query).fetchall())


# --- 1. cached metadata: SQLite vs PostgreSQL ----------------------------------------------


def metadata_part(args: argparse.Namespace, eng: Engines) -> str:
    src = b.synthetic_repo(eng.ws / "module.git", files=12, tags=VERSIONS, small=True)
    paths = endpoints(src.tags[-1].lstrip("v"))
    pg_env = eng.env(s3=False)
    setups = {"sqlite": {}, "postgres": pg_env}
    results: dict[tuple[str, str], list[b.Load]] = {}
    with b.servers() as started:
        for name, env in setups.items():
            data = eng.ws / f"meta-{name}"
            b.gitreg_cli(data, "repo", "add", str(src.path), "--module", MODULE, env=env)
            started.append(b.start_gitreg(data, eng.tls, eng.ws, "info", env=env, name=name))
        for server in started:
            status, _, body = b.fetch(server.url(paths["versions"]), eng.tls.ca)
            listed = json.loads(body)["modules"][0]["versions"] if status == 200 else []
            b.require(len(listed) == VERSIONS, f"{server.name} lists every version")
            for path in paths.values():  # warm-up: fills the metadata cache
                b.wrk(server.url(path), seconds=1, connections=args.connections)
        # What PostgreSQL spends with both servers idle (each replica's change-counter
        # read every 0.5 s), to compare with its CPU under load.
        before = b.cpu_seconds(eng.postgres_pid)
        time.sleep(5)
        idle_ms_per_s = (b.cpu_seconds(eng.postgres_pid) - before) / 5 * 1000
        for round_no in range(args.rounds):
            order = started if round_no % 2 == 0 else started[::-1]
            for endpoint, path in paths.items():
                for server in order:
                    load = b.measure(
                        server,
                        path,
                        seconds=args.seconds,
                        connections=args.connections,
                        also=[eng.postgres_pid],
                        tries=args.tries,
                    )
                    b.require(load.errors == 0 and load.non2xx == 0, f"{server.name} {endpoint}")
                    results.setdefault((server.name, endpoint), []).append(load)
    return render_metadata(args, results, list(paths), idle_ms_per_s)


def render_metadata(
    args: argparse.Namespace,
    results: dict[tuple[str, str], list[b.Load]],
    names: list[str],
    idle_ms_per_s: float,
) -> str:
    rows = []
    for name in names:
        s, p = results[("sqlite", name)], results[("postgres", name)]
        ratios = sorted(x.rps / y.rps for x, y in zip(p, s, strict=True))
        ratio = b.median(ratios)
        rows.append(
            [
                name,
                f"{b.median([x.rps for x in s]):,.0f}",
                f"{b.median([x.rps for x in p]):,.0f}",
                f"{ratio:.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f})",
                f"{b.median([x.cpu_us_per_request for x in s]):.0f}"
                f" / {b.median([x.cpu_us_per_request for x in p]):.0f}",
                f"{b.median([x.also_us_per_request for x in p]):.2f}",
                f"{b.median([x.p50_ms for x in s]):.2f} / {b.median([x.p50_ms for x in p]):.2f}",
                "yes" if ratio >= 0.95 else "NO",
            ]
        )
    headers = [
        "endpoint",
        "SQLite req/s",
        "PostgreSQL req/s",
        "PG/SQLite (range)",
        "gitreg CPU us/req S / PG",
        "PostgreSQL CPU us/req",
        "p50 ms S / PG",
        "within 5%",
    ]
    loads = [x for runs in results.values() for x in runs]
    return "\n".join(
        [
            "### 1. Cached metadata: one replica on SQLite vs one on PostgreSQL",
            "",
            f"wrk -t1 -c{args.connections} -d{args.seconds}s per cell, TLS, keep-alive;"
            f" {args.rounds} interleaved rounds after a warm-up, medians; PG/SQLite is the"
            " median of per-round paired ratios. Blobs on local disk for both. PostgreSQL CPU"
            " is the postmaster and all its backends (user+system, /proc) per answered request"
            " of the PostgreSQL-backed server, measured over the same wrk run.",
            "",
            b.table(headers, rows),
            "",
            b.contention_note(loads),
            f"PostgreSQL CPU with both servers idle: {idle_ms_per_s:.1f} ms per second"
            " (/proc ticks are 10 ms, so small per-request figures are within one tick).",
        ]
    )


# --- 2. publish throughput: one replica vs three -------------------------------------------


def make_sources(ws: Path, repos: int, tags: int, files: int) -> list[b.SyntheticRepo]:
    """`repos` module repositories of `files` small files each, with `tags` tags (a few
    files changed between tags, so every version's archive is different)."""
    return [
        b.synthetic_repo(ws / "sources" / f"r{n}.git", files=files, tags=tags, small=True, seed=n)
        for n in range(repos)
    ]


def register(eng: Engines, env: dict[str, str], sources: list[b.SyntheticRepo]) -> None:
    def one(number: int) -> None:
        b.gitreg_cli(
            eng.ws / f"cli-{secrets.token_hex(4)}",  # one scratch data dir per command
            *("repo", "add", str(sources[number].path), "--module", f"acme/r{number}/null"),
            *("--no-sync", "--forge-repo", f"acme/r{number}", "--webhook-secret", SECRET),
            env=env,
        )

    one(0)  # the first command migrates the new database
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(one, range(1, len(sources))))


def start_replicas(eng: Engines, env: dict[str, str], count: int, tag: str) -> list[b.Server]:
    def one(number: int) -> b.Server:
        return b.start_gitreg(
            eng.ws / f"{tag}-replica-{number}",
            eng.tls,
            eng.ws,
            "warning",
            cpu=None,
            env=env,
            name=f"{tag}-{number + 1}",
            args=["--reconcile-interval", "0"],
        )

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


def post_webhook(server: b.Server, ca: Path, repo: str, tag: str) -> int:
    prepared = delivery("github", "push-tag-created", repo=repo, tag=tag, secret=SECRET)
    request = urllib.request.Request(
        server.url(prepared.route), data=prepared.body, headers=prepared.headers, method="POST"
    )
    status, _, _ = _urlopen(request, ca)
    return status


def _urlopen(request: urllib.request.Request, ca: Path) -> tuple[int, object, bytes]:
    context = ssl.create_default_context(cafile=str(ca))
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


@dataclass
class Drain:
    replicas: int
    versions: int
    seconds: float
    answers_s: float
    jobs: int
    cpu_s: float
    idle_s: float  # until the job queue was empty again
    foreign_cores: float  # CPU of other processes meanwhile, in cores

    @property
    def per_second(self) -> float:
        return self.versions / self.seconds


def drain(
    eng: Engines, env: dict[str, str], replicas: list[b.Server], sources: list[b.SyntheticRepo]
) -> Drain:
    """One webhook per (repository, tag), posted at once over the replicas; the time until
    every version is in the index."""
    tags = len(sources[0].tags)
    work = [(n, t) for t in range(tags) for n in range(len(sources))]
    pids = [r.pid for r in replicas] + [eng.postgres_pid, eng.moto.server.pid]
    b.wait_quiet()
    cpu_before = sum(b.cpu_seconds(pid) for pid in pids)
    busy_before, own_before = b._machine_busy(), _own_cpu()
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=16) as pool:
        statuses = list(
            pool.map(
                lambda w: post_webhook(
                    replicas[w[0] % len(replicas)],
                    eng.tls.ca,
                    f"acme/r{w[0]}",
                    sources[w[0]].tags[w[1]],
                ),
                work,
            )
        )
    answered = time.monotonic() - started
    b.require(set(statuses) <= {200, 202}, f"webhooks answered {sorted(set(statuses))}")
    deadline = started + 600
    while sql(env, "SELECT count(*) FROM module_versions") != [(len(work),)]:
        b.require(time.monotonic() < deadline, "every version published within 10 minutes")
        time.sleep(0.02)
    seconds = time.monotonic() - started
    cpu = sum(b.cpu_seconds(pid) for pid in pids) - cpu_before
    # The rest of the machine's CPU meanwhile, but for this script posting the webhooks.
    foreign = b._machine_busy() - busy_before - cpu - (_own_cpu() - own_before)
    # Deliveries that came while their repository's job ran queued one more job each,
    # which finds nothing new; the queue must empty with no job failed.
    while (states := _job_states(env)).keys() - {"done"}:
        b.require(time.monotonic() < deadline and "failed" not in states, f"jobs: {states}")
        time.sleep(0.05)
    idle = time.monotonic() - started
    jobs = sum(states.values())
    b.progress(f"{len(replicas)} replica(s): {len(work)} versions in {seconds:.2f}s, {states}")
    return Drain(len(replicas), len(work), seconds, answered, jobs, cpu, idle, foreign / seconds)


def _job_states(env: dict[str, str]) -> dict[str, int]:
    """Jobs per state, e.g. {"done": 40, "queued": 2}."""
    rows = sql(env, "SELECT state, count(*) FROM jobs GROUP BY state")
    return {str(state): int(str(count)) for state, count in rows}


def _own_cpu() -> float:
    """CPU of this process (the webhook client's threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def render_drains(args: argparse.Namespace, drains: list[Drain]) -> str:
    rows = [
        [
            d.replicas,
            d.versions,
            d.jobs,
            f"{d.answers_s:.2f}",
            f"{d.seconds:.2f}",
            f"{d.per_second:.1f}",
            f"{d.idle_s:.2f}",
            f"{d.cpu_s / d.versions * 1000:.0f}",
            f"{d.cpu_s / d.seconds:.2f}",
            f"{max(0.0, d.foreign_cores):.2f}",
        ]
        for d in drains
    ]
    headers = [
        "replicas",
        "versions",
        "jobs run",
        "all webhooks answered s",
        "all published s",
        "versions/s",
        "queue empty s",
        "CPU ms/version",
        "cores used",
        "other processes, cores",
    ]
    return "\n".join(
        [
            "### 2. Publish throughput: one replica vs three",
            "",
            f"{args.repos} repositories of {args.files} small files (~3 kB) x {args.tags} tags,"
            " one signed GitHub tag-push webhook"
            " per tag, all posted at once (16 at a time, spread round-robin over the"
            " replicas); time from the first POST until the last version is in PostgreSQL."
            " Each replica has its own data dir and 4 job threads; replicas share one"
            " PostgreSQL database and one S3 bucket (moto). Not pinned: the replicas,"
            " PostgreSQL and moto share this machine's cores. CPU ms/version sums replicas,"
            " PostgreSQL and moto, and cores used is that CPU per second of the run; other"
            " processes are everything else on the machine but this script's webhook client."
            " A webhook for a repository that already has a queued job"
            " folds into it, so there are fewer jobs than webhooks.",
            "",
            b.table(headers, rows),
        ]
    )


# --- 3. webhook to installable on another replica ------------------------------------------


def latency_part(
    args: argparse.Namespace, eng: Engines, replicas: list[b.Server], source: b.SyntheticRepo
) -> str:
    first, last = replicas[0], replicas[-1]
    first_s: list[float] = []
    listed_s: list[float] = []
    served_s: list[float] = []
    for run in range(args.latency_runs):
        version = f"2.{run}.0"
        b.tag(source.path, f"v{version}", source.add_commit())
        b.wait_quiet()
        started = time.monotonic()
        b.require(post_webhook(first, eng.tls.ca, "acme/r0", f"v{version}") == 202, "webhook")
        seen: dict[str, float] = {}
        while len(seen) < 2:  # poll both: when replica 1 lists it, and when replica 3 does
            for server in (first, last):
                if server.name not in seen and version in listed_versions(
                    server, eng.tls.ca, "acme/r0/null"
                ):
                    seen[server.name] = time.monotonic() - started
            b.require(time.monotonic() - started < 60, f"{version} listed within 60 s")
            time.sleep(0.005)
        first_s.append(seen[first.name])
        listed_s.append(seen[last.name])
        while not serves_archive(last, eng.tls.ca, f"acme/r0/null/{version}"):
            b.require(time.monotonic() - started < 60, f"{version} downloadable within 60 s")
            time.sleep(0.01)
        served_s.append(time.monotonic() - started)
        b.progress(f"latency {run}: listed {listed_s[-1]:.3f}s, served {served_s[-1]:.3f}s")
    rows = [
        [
            what,
            f"{b.median(v) * 1000:.0f}",
            f"{percentile(v, 0.9) * 1000:.0f}",
            f"{max(v) * 1000:.0f}",
        ]
        for what, v in (
            ("listed by replica 1 (published)", first_s),
            ("listed by replica 3", listed_s),
            ("replica 3 serves the download", served_s),
        )
    ]
    return "\n".join(
        [
            "### 3. Webhook to installable across replicas",
            "",
            f"{args.latency_runs} times: a new tag in the repository, its signed webhook"
            " POSTed to replica 1, then replicas 1 and 3 polled in turn until their `versions`"
            " list the tag, then replica 3 until its `download` answers 204 with an"
            " `X-Terraform-Get` whose archive GET returns the whole archive (from S3)."
            " Times from the POST; three replicas idle"
            " otherwise (idle job threads of replicas 2 and 3 look for work every 1 s; replica"
            " 1 is woken by its own webhook).",
            "",
            b.table(["until", "median ms", "p90 ms", "max ms"], rows),
        ]
    )


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def listed_versions(server: b.Server, ca: Path, address: str) -> list[str]:
    status, _, body = b.fetch(server.url(f"/v1/modules/{address}/versions"), ca)
    if status != 200:
        return []
    return [v["version"] for v in json.loads(body)["modules"][0]["versions"]]


def archive_url(server: b.Server, ca: Path, address_version: str) -> str | None:
    status, headers, _ = b.fetch(server.url(f"/v1/modules/{address_version}/download"), ca)
    if status != 204:
        return None
    location: str = headers["X-Terraform-Get"]
    return urllib.parse.urljoin(server.url("/"), location)


def serves_archive(server: b.Server, ca: Path, address_version: str) -> bool:
    url = archive_url(server, ca, address_version)
    if url is None:
        return False
    status, headers, body = b.fetch(url, ca)
    return status == 200 and len(body) == int(headers["Content-Length"]) > 0


# --- 4. archive downloads from S3: stream vs redirect --------------------------------------


def big_module(ws: Path, megabytes: int) -> Path:
    path = ws / "sources" / "big"
    path.mkdir(parents=True)
    b.git(path, "init", "-q", "-b", "main")
    (path / "main.tf").write_text('output "big" { value = true }\n')
    # Random bytes do not compress: the archive is about as large as the file.
    (path / "lambda.bin").write_bytes(secrets.token_bytes(megabytes * 1_000_000))
    b.git(path, "add", ".")
    b.git(path, "commit", "-q", "-m", "big")
    b.git(path, "tag", "v1.0.0")
    return path


def curl_downloads(url: str, ca: Path, count: int) -> list[tuple[int, float]]:
    """(bytes, seconds) of `count` downloads, one curl each (a new connection, as one
    `terraform init` makes), following redirects."""
    done = []
    for _ in range(count):
        command = ["curl", "-sS", "-L", "--fail", "--cacert", str(ca), "-o", "/dev/null"]
        command += ["-w", "%{size_download} %{time_total}", url]
        result = subprocess.run(
            b.pinned(command, b.CLIENT_CPU), capture_output=True, text=True, timeout=300
        )
        b.require(result.returncode == 0, f"curl {url}: {result.stderr}")
        size, seconds = result.stdout.split()
        done.append((int(size), float(seconds)))
    return done


def archives_part(args: argparse.Namespace, eng: Engines) -> str:
    env = eng.env(s3=True)
    source = big_module(eng.ws, args.archive_mb)
    b.gitreg_cli(
        eng.ws / "cli-big", "repo", "add", str(source), "--module", "acme/big/null", env=env
    )
    rows = []
    with b.servers() as started:
        for mode in ("stream", "redirect"):
            server = b.start_gitreg(
                eng.ws / f"big-{mode}",
                eng.tls,
                eng.ws,
                "warning",
                env={**env, "GITREG_BLOB_DOWNLOADS": mode},
                name=mode,
            )
            started.append(server)
            url = archive_url(server, eng.tls.ca, "acme/big/null/1.0.0")
            b.require(url is not None, f"{mode}: download URL")
            assert url is not None
            curl_downloads(url, eng.tls.ca, 1)  # warm-up
            pids = [server.pid, eng.moto.server.pid]
            b.wait_quiet()
            before = [b.cpu_seconds(pid) for pid in pids]
            wall = time.monotonic()
            done = curl_downloads(url, eng.tls.ca, args.downloads)
            wall = time.monotonic() - wall
            cpu = [b.cpu_seconds(pid) - x for pid, x in zip(pids, before, strict=True)]
            total = sum(size for size, _ in done)
            b.require(len({size for size, _ in done}) == 1, f"{mode}: same size every time")
            per = b.median([s for _, s in done])
            rows.append(
                [
                    mode,
                    f"{done[0][0] / 1e6:.1f}",
                    f"{done[0][0] / per / 1e6:.0f}",
                    f"{per * 1000:.0f}",
                    f"{total / wall / 1e6:.0f}",
                    f"{cpu[0] / total * 1e9:.1f}",
                    f"{cpu[1] / total * 1e9:.1f}",
                ]
            )
            b.progress(f"{mode}: {rows[-1]}")
    headers = [
        "blob_downloads",
        "MB",
        "MB/s (median)",
        "ms/download",
        "MB/s incl. curl start",
        "gitreg CPU s/GB",
        "moto CPU s/GB",
    ]
    return "\n".join(
        [
            "### 4. Archive downloads from S3: stream vs redirect",
            "",
            f"One archive of {args.archive_mb} MB of random bytes, {args.downloads} sequential"
            " downloads with curl (a new TLS connection each, `-L` follows the 302), gitreg and"
            " moto pinned to CPU 1, curl to CPU 0. **The S3 server here is moto** (Python,"
            " werkzeug, objects in memory), not AWS or MinIO: absolute MB/s are moto's, and"
            " with `redirect` the bytes come from moto alone.",
            "",
            b.table(headers, rows),
        ]
    )


# --- main ----------------------------------------------------------------------------------


def run(args: argparse.Namespace, ws: Path) -> str:
    out = [
        "## Scale-out (PostgreSQL + S3)",
        "",
        f"Machine: {b.machine_line()}; " + versions_line(),
        "",
    ]
    with engines(ws) as eng:
        out += [metadata_part(args, eng), ""]
        sources = make_sources(ws, args.repos, args.tags, args.files)
        drains = []
        with b.servers() as started:
            for count in (1, 3):
                env = eng.env(s3=True)
                register(eng, env, sources)
                replicas = start_replicas(eng, env, count, f"pub{count}")
                started += replicas
                drains.append(drain(eng, env, replicas, sources))
                if count == 3:
                    latency = latency_part(args, eng, replicas, sources[0])
                for server in replicas:
                    server.stop()
        out += [render_drains(args, drains), "", latency, ""]
        out += [archives_part(args, eng)]
    return "\n".join(out)


def versions_line() -> str:
    from importlib import metadata

    found = [f"{d} {metadata.version(d)}" for d in ("psycopg", "obstore", "moto")]
    server = subprocess.run(
        [str(p) for p in sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))[-1:]]
        + ["--version"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return ", ".join([server, *found])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5, help="wrk run length (part 1)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per cell (part 1)")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--repos", type=int, default=30, help="repositories (part 2)")
    parser.add_argument("--tags", type=int, default=3, help="tags per repository (part 2)")
    parser.add_argument("--files", type=int, default=300, help="files per repository (part 2)")
    parser.add_argument("--latency-runs", type=int, default=10, help="tags pushed (part 3)")
    parser.add_argument("--archive-mb", type=int, default=20, help="archive size (part 4)")
    parser.add_argument("--downloads", type=int, default=8, help="downloads per mode (part 4)")
    parser.add_argument(
        "--tries", type=int, default=4, help="runs per cell at most, when others use the CPU"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = parser.parse_args()
    # SIGTERM unwinds like Ctrl-C, so PostgreSQL, moto and the replicas are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with b.workspace("scale-out", args.keep) as ws:
        print(run(args, ws))


if __name__ == "__main__":
    main()

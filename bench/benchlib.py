"""Shared plumbing for the benchmarks in this directory (not a benchmark itself).

Everything here runs on 127.0.0.1 only and is bounded in time: servers are
started as child processes of the benchmark and stopped by their own pid, load
comes from `wrk` with a fixed duration, and every wait has a deadline.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import io
import json
import os
import platform
import random
import resource
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
PYTHON = sys.executable
STARTUP_TIMEOUT = 30.0
# With 2 cores, the server under test gets one and the load generator the other,
# so neither steals the other's CPU and runs are comparable across servers.
SERVER_CPU = "1"
CLIENT_CPU = "0"

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


# --- reporting ----------------------------------------------------------------------------


def machine_line() -> str:
    """Date, cores, CPU and the versions that matter, for the top of every report."""
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions = []
    for dist in ("starlette", "uvicorn", "dulwich", "pygit2"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions.append(f"{dist} {metadata.version(dist)}")
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{today}; {os.cpu_count()} cores ({cpu}); Linux {platform.release()}; "
        f"Python {platform.python_version()}; " + ", ".join(versions)
    )


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table; numbers right-aligned."""

    def cell(value: object) -> str:
        return str(value)

    text_rows = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    numeric = [
        all(_looks_numeric(row[i]) for row in text_rows) if text_rows else False
        for i in range(len(headers))
    ]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(cells, widths, numeric, strict=True)
        ]
        return "| " + " | ".join(parts) + " |"

    sep = (
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if n else ("-" * (w + 2))
            for w, n in zip(widths, numeric, strict=True)
        )
        + "|"
    )
    return "\n".join([line(list(headers)), sep, *(line(r) for r in text_rows)])


def _looks_numeric(text: str) -> bool:
    stripped = text.replace(",", "").replace("x", "").replace("%", "").strip()
    try:
        float(stripped.split()[0] if stripped else "x")
    except ValueError:
        return False
    return True


def mib(kib: float) -> str:
    return f"{kib / 1024:.1f}"


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


# --- processes ----------------------------------------------------------------------------


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinned(command: Sequence[str], cpu: str | None) -> list[str]:
    """`taskset` execs the command, so the pid we get is the command's own."""
    if cpu is None or shutil.which("taskset") is None:
        return list(command)
    return ["taskset", "-c", cpu, *command]


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def url(self, path: str = "") -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def spawn(
    name: str,
    command: Sequence[str],
    log_path: Path,
    port: int,
    cpu: str | None = SERVER_CPU,
    env: dict[str, str] | None = None,
) -> Server:
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            pinned(command, cpu),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
    return Server(name, process, port, log_path)


def wait_https(server: Server, path: str, ca: Path, timeout: float = STARTUP_TIMEOUT) -> None:
    """Wait until `path` answers 2xx over TLS, or fail with the server's log."""
    context = ssl.create_default_context(cafile=str(ca))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited:\n{server.log_path.read_text()[-3000:]}")
        with (
            contextlib.suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(server.url(path), context=context, timeout=2) as answer,
        ):
            if 200 <= answer.status < 300:
                return
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"{server.name} did not answer:\n{server.log_path.read_text()[-3000:]}")


def fetch(url: str, ca: Path, headers: dict[str, str] | None = None) -> tuple[int, Any, bytes]:
    """(status, headers, body) of one GET over TLS, 204s included."""
    context = ssl.create_default_context(cafile=str(ca))
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


@contextlib.contextmanager
def servers() -> Iterator[list[Server]]:
    """Collects started servers and stops every one of them on the way out."""
    started: list[Server] = []
    try:
        yield started
    finally:
        for server in reversed(started):
            server.stop()


@contextlib.contextmanager
def workspace(prefix: str, keep: bool = False) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=f"gitreg-bench-{prefix}-"))
    path.chmod(0o755)  # nginx workers run as nobody; the TLS key dir stays 0700
    try:
        yield path
    finally:
        if keep:
            print(f"(kept {path})", file=sys.stderr)
        else:
            shutil.rmtree(path, ignore_errors=True)


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS/VmHWM/... of a process, in KiB."""
    values: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key.startswith("Vm") and rest.strip().endswith("kB"):
            values[key] = int(rest.split()[0])
    return values


def cpu_seconds(pid: int) -> float:
    """User+system CPU of a process (all its threads) and its direct children (nginx's
    worker), from /proc; 10 ms resolution."""
    total = 0.0
    pids = [pid]
    with contextlib.suppress(OSError):
        pids += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    tick = os.sysconf("SC_CLK_TCK")
    for one in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _machine_busy() -> float:
    """CPU-seconds the whole machine spent in user+nice+system since boot (not irq/steal)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system = (int(v) for v in fields[:3])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wait_quiet(max_wait: float = 60.0, threshold: float = 0.10, window: float = 0.5) -> float:
    """Wait (at most `max_wait` s) until the machine is nearly idle: other work on this
    shared machine (someone's test suite) must not run during a measurement. Returns the
    load (in cores) of the last window. GITREG_BENCH_NO_WAIT=1 skips the wait (smoke tests
    of the scripts themselves, not measurements)."""
    if os.environ.get("GITREG_BENCH_NO_WAIT"):
        return 0.0
    deadline = time.monotonic() + max_wait
    while True:
        before = _machine_busy()
        time.sleep(window)
        load = (_machine_busy() - before) / window
        if load < threshold or time.monotonic() > deadline:
            return load


@dataclass
class Finished:
    returncode: int
    seconds: float
    maxrss_kib: int
    stdout: str
    # The largest sum of VmRSS over the command and all its descendants seen at one
    # poll (archive worker processes); 0 when not asked for.
    tree_rss_kib: int = 0
    # User + system CPU seconds of the command and of every descendant it waited
    # for (wait4's rusage): steadier than wall time on a shared machine.
    cpu_seconds: float = 0.0


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children...), from /proc."""
    found: list[int] = []
    todo = [pid]
    while todo:
        one = todo.pop()
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{one}/task").iterdir():
                kids = [int(c) for c in (task / "children").read_text().split()]
                found += kids
                todo += kids
    return found


def tree_rss(pid: int) -> int:
    """VmRSS of a process and all its descendants now, in KiB."""
    total = 0
    for one in [pid, *descendants(pid)]:
        with contextlib.suppress(OSError, KeyError):
            total += proc_status(one)["VmRSS"]
    return total


def run_measured(
    command: Sequence[str],
    env: dict[str, str] | None = None,
    timeout: float = 1800,
    cwd: Path | None = None,
) -> Finished:
    """Run a command to completion: wall time and its peak RSS.

    The peak is VmHWM of the command's own address space, polled every 10 ms until it
    exits (VmHWM only grows, so the last reading is the peak to within the last 10 ms).
    wait4's ru_maxrss is no good here: Linux carries the RSS of the forking parent (this
    benchmark, holding a synthetic repository in memory) into the child's figure."""
    start = time.perf_counter()
    peak = tree_peak = 0
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(
            list(command),
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError, KeyError):
                peak = max(peak, proc_status(process.pid)["VmHWM"])
                tree_peak = max(tree_peak, tree_rss(process.pid))
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                process.kill()
                pid, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.01)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    cpu = usage.ru_utime + usage.ru_stime
    return Finished(process.returncode, seconds, peak, text, tree_peak, cpu)


def gitreg_cli(
    data_dir: Path,
    *args: str,
    cpu: str | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Finished:
    """`python -m gitreg ARGS --data-dir D`, measured; raises on failure. `env` adds
    variables (GITREG_DATABASE_URL...) to this process's environment; `cwd` (first on
    `python -m`'s path) can be a copy of another commit's tree to run that gitreg."""
    command = pinned([PYTHON, "-m", "gitreg", *args, "--data-dir", str(data_dir)], cpu)
    done = run_measured(command, env=env, cwd=cwd)
    if done.returncode != 0:
        raise RuntimeError(f"gitreg {' '.join(args)} exited {done.returncode}:\n{done.stdout}")
    return done


# --- TLS and the three kinds of server ----------------------------------------------------


@dataclass(frozen=True)
class Tls:
    ca: Path
    cert: Path
    key: Path


def make_tls(directory: Path) -> Tls:
    """gitreg's own local CA and ECDSA P-256 server certificate, shared by every server."""
    from gitreg.server.tls import ensure_local_tls

    made = ensure_local_tls(directory, ["127.0.0.1"])
    return Tls(made.ca_cert, made.cert, made.key)


def start_gitreg(
    data_dir: Path,
    tls: Tls,
    log_dir: Path,
    log_level: str = "info",
    cpu: str | None = SERVER_CPU,
    env: dict[str, str] | None = None,
    name: str = "gitreg",
    args: Sequence[str] = (),
) -> Server:
    """`gitreg serve` on a free port; `name` labels it in progress lines and tables,
    `env` adds variables (a PostgreSQL index, an S3 blob store), `args` more flags."""
    port = free_port()
    command = [
        PYTHON,
        "-m",
        "gitreg",
        "serve",
        "--data-dir",
        str(data_dir),
        "--port",
        str(port),
        "--tls-cert",
        str(tls.cert),
        "--tls-key",
        str(tls.key),
        "--log-level",
        log_level,
        *args,
    ]
    server = spawn(name, command, log_dir / f"{name}-{port}.log", port, cpu, env)
    wait_https(server, "/healthz", tls.ca)
    return server


def start_bare(
    routes_file: Path,
    tls: Tls,
    log_dir: Path,
    log_level: str = "info",
    cpu: str | None = SERVER_CPU,
) -> Server:
    """bench/bare_server.py: bare Starlette under uvicorn with gitreg's uvicorn settings."""
    port = free_port()
    command = [
        PYTHON,
        str(BENCH_DIR / "bare_server.py"),
        "--routes",
        str(routes_file),
        "--port",
        str(port),
        "--cert",
        str(tls.cert),
        "--key",
        str(tls.key),
        "--log-level",
        log_level,
    ]
    server = spawn("bare", command, log_dir / f"bare-{port}.log", port, cpu)
    wait_https(server, "/__ready", tls.ca)
    return server


NGINX_CONF = """\
daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log {access};
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    types {{ application/json json; application/gzip gz; }}
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        root {root};
        location = /__ready {{ return 204; }}
{locations}
    }}
}}
"""


def start_nginx(
    directory: Path,
    root: Path,
    tls: Tls,
    locations: str = "",
    access_log: bool = True,
    cpu: str | None = SERVER_CPU,
) -> Server:
    """nginx (one worker, like one uvicorn worker) serving `root` over TLS."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        raise RuntimeError("nginx is not installed: apt-get install -y nginx")
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = directory / "nginx.conf"
    conf.write_text(
        NGINX_CONF.format(
            dir=directory,
            access=f"{directory}/access.log" if access_log else "off",
            port=port,
            cert=tls.cert,
            key=tls.key,
            root=root,
            locations=locations,
        )
    )
    server = spawn(
        "nginx",
        [nginx, "-c", str(conf), "-e", str(directory / "error.log")],
        directory / "stdout.log",
        port,
        cpu,
    )
    wait_https(server, "/__ready", tls.ca)
    return server


# --- load ---------------------------------------------------------------------------------

WRK_DONE = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRKJSON {\\"requests\\":%d,\\"duration_us\\":%d,\\"bytes\\":%d,\\"p50_us\\":%d,"
    .. "\\"p99_us\\":%d,\\"mean_us\\":%f,\\"max_us\\":%d,\\"errors\\":%d,\\"non2xx\\":%d}\\n",
    summary.requests, summary.duration, summary.bytes, latency:percentile(50),
    latency:percentile(99), latency.mean, latency.max,
    e.connect + e.read + e.write + e.timeout, e.status))
end
"""


@dataclass
class Load:
    requests: int
    seconds: float
    bytes: int
    p50_ms: float
    p99_ms: float
    mean_ms: float
    errors: int
    non2xx: int
    server_cpu_s: float = 0.0  # CPU the server used during the run, when measured
    also_cpu_s: float = 0.0  # CPU of the `also` processes (a database server), when asked
    foreign_cores: float = 0.0  # CPU used by processes other than server and wrk, in cores
    attempts: int = 1

    @property
    def cpu_us_per_request(self) -> float:
        return self.server_cpu_s / self.requests * 1e6 if self.requests else float("nan")

    @property
    def also_us_per_request(self) -> float:
        return self.also_cpu_s / self.requests * 1e6 if self.requests else float("nan")

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds else 0.0


def wrk(
    url: str,
    *,
    seconds: float,
    connections: int,
    threads: int = 1,
    lua: str = "",
    timeout_s: int = 30,
    workdir: Path | None = None,
    cpu: str | None = CLIENT_CPU,
    server: Server | None = None,
    also: Sequence[int] = (),
) -> Load:
    """One bounded wrk run; `lua` may define `request`/`init`, a `done` is appended.
    With `server`, the CPU time that server spent during the run is recorded too; with
    `also`, that of these pids and their direct children (PostgreSQL's postmaster and
    its backends), which then does not count as other processes' CPU either."""
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed: apt-get install -y wrk")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", dir=workdir, delete=False) as script:
        script.write(lua + "\n" + WRK_DONE)
    try:
        command = [
            "wrk",
            f"-t{threads}",
            f"-c{connections}",
            f"-d{max(1, round(seconds))}s",
            f"--timeout={timeout_s}s",
            "-s",
            script.name,
            url,
        ]
        cpu_before = cpu_seconds(server.pid) if server else 0.0
        also_before = sum(cpu_seconds(pid) for pid in also)
        busy_before, wrk_before = _machine_busy(), _children_cpu()
        result = subprocess.run(
            pinned(command, cpu), capture_output=True, text=True, timeout=seconds + timeout_s + 30
        )
        cpu_used = cpu_seconds(server.pid) - cpu_before if server else 0.0
        also_used = sum(cpu_seconds(pid) for pid in also) - also_before
        busy = _machine_busy() - busy_before
        foreign = busy - cpu_used - also_used - (_children_cpu() - wrk_before)
    finally:
        os.unlink(script.name)
    for line in result.stdout.splitlines():
        if line.startswith("WRKJSON "):
            raw = json.loads(line[len("WRKJSON ") :])
            return Load(
                requests=raw["requests"],
                seconds=raw["duration_us"] / 1e6,
                bytes=raw["bytes"],
                p50_ms=raw["p50_us"] / 1000,
                p99_ms=raw["p99_us"] / 1000,
                mean_ms=raw["mean_us"] / 1000,
                errors=raw["errors"],
                non2xx=raw["non2xx"],
                server_cpu_s=cpu_used,
                also_cpu_s=also_used,
                foreign_cores=max(0.0, foreign) / max(seconds, 1),
            )
    raise RuntimeError(f"wrk printed no summary:\n{result.stdout}\n{result.stderr}")


def measure(
    server: Server, path: str, *, tries: int = 4, max_foreign: float = 0.15, **options: Any
) -> Load:
    """`wrk` against `server` once the machine is quiet; a run during which other
    processes used more than `max_foreign` of a core is thrown away and run again
    (at most `tries` runs; the last one is kept, with its `foreign_cores` to show)."""
    load = None
    for attempt in range(1, tries + 1):
        wait_quiet()
        load = wrk(server.url(path), server=server, **options)
        load.attempts = attempt
        progress(
            f"{server.name} {path[:60]}: {load.rps:,.0f} req/s, {load.mb_per_s:,.0f} MB/s,"
            f" other processes {load.foreign_cores:.2f} cores (try {attempt})"
        )
        if load.foreign_cores <= max_foreign:
            break
    assert load is not None
    return load


def contention_note(loads: Sequence[Load]) -> str:
    worst = max((x.foreign_cores for x in loads), default=0.0)
    repeated = sum(x.attempts - 1 for x in loads)
    return (
        f"Other processes' CPU during the kept runs: at most {worst:.2f} cores;"
        f" runs thrown away and repeated because of it: {repeated}."
    )


def lua_paths(paths: Sequence[str], headers: dict[str, str] | None = None) -> str:
    """A wrk script that cycles through `paths`."""
    quoted = ", ".join(json.dumps(p) for p in paths)
    header_lines = "".join(
        f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}\n" for k, v in (headers or {}).items()
    )
    return (
        f"{header_lines}local paths = {{{quoted}}}\n"
        "local i = 0\n"
        "request = function()\n"
        "  i = (i % #paths) + 1\n"
        "  return wrk.format(nil, paths[i])\n"
        "end\n"
    )


# --- git repositories ---------------------------------------------------------------------


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        input=stdin,
        capture_output=True,
        check=True,
        timeout=900,
    )
    return result.stdout.decode().strip()


_VOCABULARY = (
    "resource variable output module provider locals data terraform count for_each"
    " depends_on lifecycle description default type string number bool list map object"
    " aws_vpc aws_subnet cidr_block tags name = { } [ ] true false null var local"
    " each.value each.key self path.module"
)
_WORDS = tuple(_VOCABULARY.split())


def _text(rng: random.Random, size: int) -> bytes:
    """Terraform-ish text of about `size` bytes (compresses about 4:1, like real code)."""
    words = rng.choices(_WORDS, k=max(1, size // 6))
    out = bytearray()
    for n, word in enumerate(words):
        out += word.encode()
        out += b"\n" if n % 9 == 8 else b" "
    return bytes(out[:size])


def _size(rng: random.Random, large: bool, small: bool) -> int:
    """94% 200 B-3 kB, 6% 4-32 kB; `large` files 128-512 kB; `small` caps all at 3 kB."""
    if small:
        return rng.randint(200, 3_000)
    if large:
        return rng.randint(128_000, 512_000)
    return rng.randint(200, 3_000) if rng.random() < 0.94 else rng.randint(4_000, 32_000)


def _content(rng: random.Random, path: str, size: int) -> bytes:
    # A few large binary files (images, zipped lambdas) that do not compress.
    if path.endswith(".bin"):
        return rng.randbytes(size)
    return _text(rng, size)


@dataclass
class SyntheticRepo:
    path: Path  # a bare repository
    files: int
    tags: list[str]
    tree_bytes: int
    pack_bytes: int
    rng: random.Random = field(repr=False)
    paths: list[str] = field(repr=False)
    last_time: int  # committer time of the last commit

    def add_commit(self, changed: int = 3) -> str:
        """A new commit on main changing a few files (untagged); returns its sha."""
        stream = bytearray(b"commit refs/heads/main\n")
        self.last_time += 3600
        stream += _commit_header(self.last_time, "change", "refs/heads/main^0")
        for path in self.rng.sample(self.paths, changed):
            size = _size(self.rng, path.endswith(".bin"), False)
            stream += _inline(path, _content(self.rng, path, size))
        stream += b"\n"
        git(self.path, "fast-import", "--quiet", stdin=bytes(stream))
        return git(self.path, "rev-parse", "refs/heads/main")


def _commit_header(when: int, message: str, parent: str | None) -> bytes:
    msg = message.encode()
    head = f"committer Bench <bench@example.com> {when} +0000\ndata {len(msg)}\n".encode() + msg
    head += b"\n"
    if parent:
        head += f"from {parent}\n".encode()
    return head


def _inline(path: str, data: bytes) -> bytes:
    mode = "100755" if path.endswith(".sh") else "100644"
    return f"M {mode} inline {path}\ndata {len(data)}\n".encode() + data + b"\n"


def synthetic_repo(
    path: Path,
    files: int = 5_000,
    tags: int = 200,
    changes_per_tag: int = 4,
    seed: int = 1,
    small: bool = False,
) -> SyntheticRepo:
    """A bare repo of `files` files a few directories deep and `tags` tags, one commit per
    tag changing `changes_per_tag` files (every fourth tag annotated), repacked by git.

    Sizes: 94% 200 B-3 kB, 5.5% 4-32 kB, 0.5% 128-512 kB (half of those incompressible
    `.bin`); `small=True` keeps every file under 3 kB (a typical module)."""
    rng = random.Random(seed)
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "--bare", "-b", "main")
    paths: list[str] = []
    for n in range(files):
        depth = rng.randint(0, 4)
        dirs = [f"d{rng.randint(0, 7)}{level}" for level in range(depth)]
        if n == 0:
            paths.append("main.tf")
            continue
        ext = rng.choice([".tf", ".tf", ".tf", ".md", ".json", ".sh", ".tpl"])
        paths.append("/".join([*dirs, f"f{n:05d}{ext}"]))
    large = {i for i in range(1, files) if rng.random() < 0.005 and not small}
    for i in sorted(large)[::2]:
        paths[i] = paths[i].rsplit(".", 1)[0] + ".bin"
    when = 1_700_000_000
    stream = bytearray()
    sizes = {p: _size(rng, i in large, small) for i, p in enumerate(paths)}
    tree_bytes = sum(sizes.values())
    stream += b"commit refs/heads/main\nmark :1\n"
    stream += _commit_header(when, "initial", None)
    for p in paths:
        stream += _inline(p, _content(rng, p, sizes[p]))
    stream += b"\n"
    tag_names: list[str] = []
    for t in range(tags):
        if t > 0:
            when += 3600
            stream += f"commit refs/heads/main\nmark :{t + 1}\n".encode()
            stream += _commit_header(when, f"change {t}", f":{t}")
            for p in rng.sample(paths, changes_per_tag):
                stream += _inline(p, _content(rng, p, _size(rng, p.endswith(".bin"), small)))
            stream += b"\n"
        name = f"v1.{t // 10}.{t % 10}"
        tag_names.append(name)
        if t % 4 == 3:
            msg = f"release {name}".encode()
            stream += f"tag {name}\nfrom :{t + 1}\n".encode()
            stream += f"tagger Bench <bench@example.com> {when} +0000\n".encode()
            stream += f"data {len(msg)}\n".encode() + msg + b"\n"
        else:
            stream += f"reset refs/tags/{name}\nfrom :{t + 1}\n\n".encode()
    git(path, "fast-import", "--quiet", stdin=bytes(stream))
    git(path, "repack", "-a", "-d", "-q")
    git(path, "prune-packed")
    pack_bytes = sum(p.stat().st_size for p in (path / "objects" / "pack").glob("*.pack"))
    return SyntheticRepo(path, files, tag_names, tree_bytes, pack_bytes, rng, paths, when)


def tag(repo: Path, name: str, commit: str) -> None:
    git(repo, "tag", name, commit)


# --- misc -------------------------------------------------------------------------------


class NullSink(io.BytesIO):
    """A writable that hashes like gitreg's BlobWriter and keeps nothing (no disk, no fsync);
    with `keep=True` it keeps the bytes too, in `chunks`. A BytesIO (whose own buffer stays
    empty) because the archive builders write to a `BinaryIO`."""

    def __init__(self, keep: bool = False) -> None:
        super().__init__()
        self.hash = hashlib.sha256()
        self.keep = keep
        self.chunks: list[bytes] = []

    def write(self, data: ReadableBuffer, /) -> int:
        view = memoryview(data)
        self.hash.update(view)
        if self.keep:
            self.chunks.append(view.tobytes())
        return view.nbytes


def progress(message: str) -> None:
    """A line on stderr, so a long run shows it is alive; the report goes to stdout."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def require(condition: bool, message: str) -> None:
    if not condition:
        raise SystemExit(f"benchmark check failed: {message}")


def baseline_tree(ws: Path, rev: str) -> Path:
    """A copy of gitreg at `rev` (the baseline of the same run), to run from its dir."""
    tree = ws / "baseline"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "gitreg"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def asgi_get(path: str, agent: str, asgi: dict[str, str]) -> dict[str, Any]:
    """The scope of a GET over HTTPS as uvicorn hands it to an app (in-process benches)."""
    return {
        "type": "http",
        "asgi": asgi,
        "http_version": "1.1",
        "method": "GET",
        "scheme": "https",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"localhost:8443"),
            (b"user-agent", agent.encode()),
            (b"accept", b"*/*"),
        ],
        "server": ("127.0.0.1", 8443),
        "client": ("127.0.0.1", 50000),
    }

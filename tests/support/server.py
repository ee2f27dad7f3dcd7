"""A real `gitreg serve` process over TLS on 127.0.0.1, and the real CLI: in this
process (`cli`), or as a process of its own where that is the point (`cli_process`)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gitreg.settings import Settings
from gitreg.storage.postgres import POLL_INTERVAL

STARTUP_TIMEOUT = 60.0
# Every server log of the session, scanned for secrets at its end (tests/conftest.py).
SERVER_LOGS: list[Path] = []
# A running server sees another process's commit within its refresh_interval
# (SQLite's data_version, gitreg/cache.py) or the change feed's poll (PostgreSQL):
# what an operator's next step after a command can count on. A command in this
# process returns well before a process of its own would have ended, so while a
# server runs `cli` waits that long before the test goes on.
SEEN_BY_SERVERS = max(Settings.refresh_interval, POLL_INTERVAL)
_SERVERS: list[RunningServer] = []


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli(
    data_dir: Path,
    *args: str,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `gitreg ARGS --data-dir DATA_DIR` in this process: `gitreg.cli.main`
    with `env` added to the environment, its standard output and error captured,
    and its exit code as a process would have it (an uncaught exception prints
    its traceback and exits 1). `serve` and whatever needs a process of its own
    (a signal, a kill, the interpreter's start) go through `cli_process`."""
    assert "serve" not in args, "`gitreg serve` runs as a process: cli_process or start_server"
    command = ["gitreg", *args, "--data-dir", str(data_dir)]
    out, err = io.StringIO(), io.StringIO()
    with (
        _environment(env or {}),
        _root_logging_restored(),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = _main(command[1:])
    if any(server.process.poll() is None for server in _SERVERS):
        time.sleep(SEEN_BY_SERVERS)
    result = subprocess.CompletedProcess(command, code, out.getvalue(), err.getvalue())
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
        )
    return result


def _main(argv: list[str]) -> int:
    """`gitreg.cli.main(argv)` as `python -m gitreg` ends: SystemExit's code,
    an uncaught exception's traceback on standard error and exit code 1."""
    from gitreg.cli import main

    try:
        return main(argv)
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            return exit_.code or 0
        print(exit_.code, file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc()
        return 1


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _root_logging_restored() -> Iterator[None]:
    """A command sets up the root logger for its own process (gitreg/logs.py),
    writing to the standard error it captures; the test gets its own logging
    back, pytest's capture included."""
    root, urllib3 = logging.getLogger(), logging.getLogger("urllib3")
    handlers, level, urllib3_level = list(root.handlers), root.level, urllib3.level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        urllib3.setLevel(urllib3_level)


def cli_process(
    data_dir: Path,
    *args: str,
    check: bool = True,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m gitreg ARGS --data-dir DATA_DIR` as a process of its own."""
    command = [sys.executable, "-m", "gitreg", *args, "--data-dir", str(data_dir)]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
        )
    return result


@dataclass
class RunningServer:
    data_dir: Path
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    args: tuple[str, ...] = field(default=())

    @property
    def host(self) -> str:
        """The registry hostname Terraform users write: `127.0.0.1:PORT`."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"https://{self.host}"

    @property
    def ca_pem(self) -> Path:
        return self.data_dir / "tls" / "ca.pem"

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_pem))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, kill: bool = False) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(
    data_dir: Path,
    *args: str,
    port: int | None = None,
    env: dict[str, str] | None = None,
    before: tuple[str, ...] = (),
) -> RunningServer:
    """Start `gitreg [BEFORE] serve` and wait until /healthz answers over TLS;
    `before` holds global flags given ahead of the command."""
    port = port or free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir.parent / f"server-{port}.log"
    SERVER_LOGS.append(log_path)
    command = [
        sys.executable,
        "-m",
        "gitreg",
        *before,
        "serve",
        "--data-dir",
        str(data_dir),
        "--port",
        str(port),
        *args,
    ]
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
    server = RunningServer(data_dir, port, process, log_path, args)
    _SERVERS[:] = [*(s for s in _SERVERS if s.process.poll() is None), server]
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"gitreg serve exited {process.returncode}:\n{server.log()}")
        if server.ca_pem.exists() or "--no-tls" in args or "--tls-cert" in args:
            with contextlib.suppress(OSError, urllib.error.URLError):
                scheme = "http" if "--no-tls" in args else "https"
                context = None if scheme == "http" else _context_for(server, args)
                with urllib.request.urlopen(
                    f"{scheme}://{server.host}/healthz", context=context, timeout=2
                ) as answer:
                    if answer.status == 200:
                        return server
        time.sleep(0.1)
    server.stop(kill=True)
    raise AssertionError(f"gitreg serve did not become healthy:\n{server.log()}")


def _context_for(server: RunningServer, args: tuple[str, ...]) -> ssl.SSLContext:
    if "--tls-cert" in args:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return server.ssl_context()

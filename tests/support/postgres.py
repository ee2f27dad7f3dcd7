"""A real PostgreSQL server for the tests, no mock of the database.

One server per pytest session, started the first time a test asks for it
(`postgres_server`), in a fresh temporary directory on a free 127.0.0.1 port with
its unix socket in that directory. Every test that wants a database gets a fresh,
empty one (`postgres_database`) and the URL a production replica would be given:
`postgresql://gitreg:PASSWORD@127.0.0.1:PORT/DB`, password-checked (SCRAM) over TCP.

The binaries are Debian's `postgresql` package (`.ci/run` installs it when initdb is
missing). initdb and postgres refuse to run as root, so under root they run as the
`postgres` system user, which owns the temporary directory. The server is tuned for
throwaway data (no fsync) and for three replicas' connection pools at once.

The server is always stopped at the end of the session, Ctrl-C and failures
included. Only a pytest killed with SIGKILL can leave one behind; the next session
stops and removes it (`sweep_orphans`), leaving other live sessions' servers alone.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.support.server import free_port

LIB_ROOT = Path("/usr/lib/postgresql")
INSTALL_HINT = (
    "install Debian's server package: `apt-get install -y postgresql` (.ci/run does this)"
)
SERVICE_USER = "postgres"  # the system user that runs the server when we are root
SUPERUSER = "postgres"  # the cluster's superuser, reachable only through the unix socket
APP_USER = "gitreg"  # what replicas log in as: owns each test database, not a superuser
DIR_PREFIX = "gitreg-test-postgres-"
STARTUP_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0

# Throwaway data: surviving a power cut buys nothing here (fsync, full_page_writes).
# synchronous_commit stays on: with fsync off it costs one write() per commit (no
# slower than off), and off would lose the
# last commits when a test crashes the server (`stop("immediate")`). 300
# connections leave room for three replicas' pools plus the test's own connections.
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "shared_buffers": "64MB",
    "log_min_messages": "warning",
}

# What each shutdown mode of the postmaster is asked with (PostgreSQL "Shutting Down
# the Server"): smart waits for clients, fast disconnects them, immediate is a crash.
STOP_SIGNALS = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT}


class PostgresMissing(Exception):
    """No PostgreSQL server binaries on this machine, or no user to run them as."""


def _version_key(bin_dir: Path) -> tuple[int, ...]:
    """`/usr/lib/postgresql/9.6/bin` -> (9, 6), so that 15 sorts above 9.6."""
    return tuple(int(part) for part in bin_dir.parent.name.split("."))


def find_bin_dir(path: str | None = None, lib_root: Path = LIB_ROOT) -> Path:
    """The directory holding initdb and postgres: PATH first (`path` overrides it,
    as for shutil.which), then the highest version under /usr/lib/postgresql/*/bin,
    where Debian puts them without linking them onto PATH."""
    found = shutil.which("initdb", path=path)
    if found:
        # /usr/local/bin/initdb may be a link into the versioned directory, which
        # is the one that holds postgres as well.
        for candidate in (Path(found).resolve().parent, Path(found).parent):
            if (candidate / "postgres").is_file():
                return candidate
    versioned = [
        initdb.parent
        for initdb in lib_root.glob("*/bin/initdb")
        if re.fullmatch(r"\d+(\.\d+)*", initdb.parent.parent.name)
        and (initdb.parent / "postgres").is_file()
    ]
    if versioned:
        return max(versioned, key=_version_key)
    raise PostgresMissing(
        f"no PostgreSQL server binaries (initdb, postgres) on PATH or in "
        f"{lib_root}/*/bin; the PostgreSQL tests need a real server: {INSTALL_HINT}"
    )


def service_account() -> tuple[int, int] | None:
    """(uid, gid) to run the server as, or None to run it as ourselves.

    initdb and postgres refuse root, as a safety rule of PostgreSQL's own."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        raise PostgresMissing(
            f"running as root, which initdb and postgres refuse, and there is no "
            f"{SERVICE_USER!r} system user to run them as; {INSTALL_HINT} (it creates "
            f"the user), or run the tests as an ordinary user"
        ) from None
    return entry.pw_uid, entry.pw_gid


@dataclass(frozen=True)
class Database:
    """A fresh database owned by `gitreg`, and the URL a replica would be given."""

    name: str
    url: str


def process_alive(pid: int) -> bool:
    """Whether a process runs; a zombie does not (an orphan whose reaper is slow)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@dataclass
class PostgresServer:
    bin_dir: Path
    root: Path
    account: tuple[int, int] | None
    port: int = 0
    password: str = field(default_factory=lambda: secrets.token_hex(16))
    process: subprocess.Popen[bytes] | None = None
    _names: Iterator[int] = field(default_factory=itertools.count)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "sockets"

    @property
    def log_path(self) -> Path:
        return self.root / "postgres.log"

    def url(self, database: str) -> str:
        return f"postgresql://{APP_USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        if not self.log_path.exists():
            return "(no server log)"
        return self.log_path.read_text(errors="replace")[-4000:]

    def admin(self, database: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        """A superuser connection through the unix socket, in autocommit."""
        return psycopg.connect(
            host=str(self.socket_dir),
            port=self.port,
            user=SUPERUSER,
            dbname=database,
            autocommit=True,
            connect_timeout=5,
        )

    def _as_account(self) -> dict[str, Any]:
        """subprocess options that run a command as the service account, if any
        (what `runuser -u postgres --` does, without a PAM session)."""
        if self.account is None:
            return {}
        uid, gid = self.account
        return {"user": uid, "group": gid, "extra_groups": []}

    def _run(self, *command: str | Path) -> None:
        result = subprocess.run(
            [str(part) for part in command],
            cwd=self.root,
            **self._as_account(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise AssertionError(f"{command[0]} failed:\n{result.stdout}\n{result.stderr}")

    def initialize(self) -> None:
        """initdb, then a first start and the `gitreg` login role."""
        for directory in (self.root, self.socket_dir):
            directory.mkdir(mode=0o700, exist_ok=True)
            if self.account:
                os.chown(directory, *self.account)
        self._run(
            self.bin_dir / "initdb",
            "--pgdata",
            self.data_dir,
            "--username",
            SUPERUSER,
            # Only processes that can enter the 0700 socket directory (its owner
            # and root) reach the socket; everything else comes over TCP with a
            # password, as replicas do in production.
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        for _attempt in range(3):
            self.port = free_port()
            if self._try_start():
                break
        else:
            raise AssertionError(f"PostgreSQL did not start on a free port:\n{self.log()}")
        with self.admin() as connection:
            connection.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(APP_USER), sql.Literal(self.password)
                )
            )

    def _try_start(self) -> bool:
        """Start the postmaster and wait until it accepts connections; False when
        it exited at once (another process took the port between free_port and
        the bind), after a failure of any other kind an AssertionError."""
        command = [str(self.bin_dir / "postgres"), "-D", str(self.data_dir)]
        command += ["-p", str(self.port), "-k", str(self.socket_dir)]
        for name, value in SETTINGS.items():
            command += ["-c", f"{name}={value}"]
        with self.log_path.open("ab") as log:
            # A session of its own: Ctrl-C at the terminal reaches pytest, whose
            # teardown then stops the server in order, not the server directly.
            self.process = subprocess.Popen(
                command,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                **self._as_account(),
                start_new_session=True,
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                if "could not bind" in self.log() or "already in use" in self.log():
                    return False
                raise AssertionError(f"postgres exited {self.process.returncode}:\n{self.log()}")
            with contextlib.suppress(psycopg.OperationalError), self.admin():
                return True
            time.sleep(0.05)
        self.stop("immediate")
        raise AssertionError(f"PostgreSQL did not accept connections:\n{self.log()}")

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start again after `stop`, on the same port, data and password."""
        if not self.is_running() and not self._try_start():
            raise AssertionError(f"port {self.port} was taken while stopped:\n{self.log()}")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: `fast` disconnects every client and shuts down cleanly,
        `immediate` is a crash (recovery runs at the next start)."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(STOP_SIGNALS[mode])
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            # The backends notice the postmaster's death and exit on their own.
            process.kill()
            process.wait()

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    @contextlib.contextmanager
    def down(self, mode: str = "fast") -> Iterator[None]:
        """The database is unreachable inside the block and back after it."""
        self.stop(mode)
        try:
            yield
        finally:
            self.start()

    def create_database(self) -> Database:
        """A fresh, empty database owned by `gitreg`, with a name unique in the session."""
        self.start()
        name = f"test_{next(self._names)}_{secrets.token_hex(3)}"
        with self.admin() as connection:
            connection.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(name), sql.Identifier(APP_USER)
                )
            )
        return Database(name, self.url(name))

    def drop_database(self, name: str) -> None:
        """Drop a database, disconnecting whatever pools a test left open on it."""
        self.start()
        with self.admin() as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def close(self) -> None:
        """Stop the server and remove its directory; safe to call twice."""
        self.stop("fast")
        shutil.rmtree(self.root, ignore_errors=True)


def _stop_leftover(root: Path) -> None:
    """Crash-stop the postmaster of a dead session's directory, if it still runs."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int((root / "data" / "postmaster.pid").read_text().split()[0])
        # Only if that pid is still this directory's postmaster, not a process
        # that reused the number.
        if str(root) not in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
            return
        os.kill(pid, signal.SIGQUIT)
        deadline = time.monotonic() + STOP_TIMEOUT
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)


def sweep_orphans(temp_root: Path) -> None:
    """Stop and remove servers left by test sessions that died without teardown
    (SIGKILL); a directory whose session is still alive belongs to someone else,
    and one without a session.pid yet is being set up by another session."""
    for root in temp_root.glob(f"{DIR_PREFIX}*"):
        try:
            session = int((root / "session.pid").read_text())
        except (OSError, ValueError):
            continue
        if not process_alive(session):
            _stop_leftover(root)
            shutil.rmtree(root, ignore_errors=True)


def start_postgres(temp_root: Path | None = None) -> PostgresServer:
    """Start a server in a new temporary directory; PostgresMissing without binaries."""
    bin_dir = find_bin_dir()
    account = service_account()
    temp_root = temp_root or Path(tempfile.gettempdir())
    sweep_orphans(temp_root)
    # Not pytest's tmp_path: its parent is 0700 root's, so the postgres user could
    # not enter it.
    server = PostgresServer(
        bin_dir, Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=temp_root)), account
    )
    (server.root / "session.pid").write_text(str(os.getpid()))
    try:
        server.initialize()
    except BaseException:
        server.close()
        raise
    return server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL server, started on first use, always stopped."""
    try:
        server = start_postgres()
    except PostgresMissing as missing:
        # A failure, not a skip: a suite that silently skips the PostgreSQL tests
        # would pass on a machine that cannot run the scale-out setup at all.
        raise pytest.fail.Exception(str(missing), pytrace=False) from None
    # Teardown below covers failures and Ctrl-C; atexit covers a session that
    # ends without running fixture teardown (an internal error).
    atexit.register(server.close)
    try:
        yield server
    finally:
        server.close()
        atexit.unregister(server.close)


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> Iterator[Database]:
    """A fresh, empty database for this test, dropped after it."""
    database = postgres_server.create_database()
    yield database
    postgres_server.drop_database(database.name)

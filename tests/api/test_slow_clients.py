"""Slow and idle clients cannot take the server down.

A real `gitreg serve` over TLS with a small connection cap and header timeout;
more idle connections than the cap are opened against it, some that never
start the TLS handshake and some that send half a request head.
"""

from __future__ import annotations

import contextlib
import json
import logging
import pickle
import resource
import socket
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gitreg.errors import ConfigError
from gitreg.server import limits as server_limits
from gitreg.server.limits import (
    RESERVED_FDS,
    ConnectionLimits,
    ConnectionLimitsMixin,
    LimitedEventLoop,
    LimitedH11Protocol,
    TlsDeadlinesMixin,
    connection_cap,
    uvicorn_options,
)
from tests.support.server import RunningServer, cli_process, free_port

pytestmark = pytest.mark.slow

CAP = 20
HEADER_TIMEOUT = 3
# Every connection here comes from 127.0.0.1: its share is the whole cap, so
# that the cap itself is what refuses (the share: tests/api/test_slow_bodies.py).
LIMIT_ENV = {
    "GITREG_MAX_CONNECTIONS": str(CAP),
    "GITREG_MAX_CONNECTIONS_PER_CLIENT": str(CAP),
    "GITREG_HEADER_TIMEOUT": str(HEADER_TIMEOUT),
}
# A bounded wait for anything the server should do within HEADER_TIMEOUT.
WAIT = HEADER_TIMEOUT + 8
HALF_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # never finished


@pytest.fixture(params=["httptools", "h11"])
def impl_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """The limits on both of uvicorn's HTTP protocols and loops:
    httptools + uvloop, the default, and h11 + asyncio, the fallback."""
    return {**LIMIT_ENV, "GITREG_HTTP_IMPL": str(request.param)}


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def _connect(server: RunningServer, opened: list[socket.socket]) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT)
    opened.append(sock)
    return sock


def _tls(server: RunningServer, opened: list[socket.socket]) -> ssl.SSLSocket:
    sock = server.ssl_context().wrap_socket(_connect(server, opened), server_hostname="127.0.0.1")
    opened.append(sock)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """Everything until the server closes (a reset counts as closing); a client
    the server never lets go of raises socket.timeout after WAIT seconds."""
    chunks = []
    with contextlib.suppress(ConnectionResetError, ssl.SSLEOFError):
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _read_response(sock: socket.socket) -> tuple[int, bytes, bytes]:
    """One response, read up to its Content-Length: status, lower-cased head, body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response head: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    head = head.lower()
    length = int(head.split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a response body"
        body += chunk
    return int(head.split(b" ", 2)[1]), head, body


def _health(server: RunningServer, opened: list[socket.socket]) -> tuple[int, bytes, bytes]:
    """GET /healthz on a fresh connection."""
    sock = _tls(server, opened)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    return _read_response(sock)


def _assert_busy(head: bytes, body: bytes) -> None:
    assert head.startswith(b"http/1.1 503 "), head
    assert b"retry-after: " in head and b"connection: close" in head
    assert json.loads(body)["errors"], body


def test_idle_connections_over_the_cap_get_503_and_are_closed_at_the_header_timeout(
    servers: Callable[..., RunningServer],
    data_dir: Path,
    sockets: list[socket.socket],
    impl_env: dict[str, str],
) -> None:
    server = servers(data_dir, env=impl_env)
    silent = [_connect(server, sockets) for _ in range(30)]  # never start TLS
    half_heads = []
    for _ in range(CAP + 10):
        sock = _tls(server, sockets)
        sock.sendall(HALF_HEAD)
        half_heads.append(sock)

    # Saturated, a fresh client still gets a prompt answer: 200, or a clean 503.
    status, head, body = _health(server, sockets)
    assert status in (200, 503)
    if status == 503:
        _assert_busy(head, body)

    # Each idle connection is either refused with a 503 at once, or closed by
    # the server when its head is not complete in time: none is kept.
    answers = [_read_all(sock) for sock in half_heads]
    refused = [answer for answer in answers if answer]
    assert len(refused) >= 10, "the cap let more than CAP idle connections in"
    for answer in refused:
        busy_head, _, busy_body = answer.partition(b"\r\n\r\n")
        _assert_busy(busy_head.lower(), busy_body)
    assert all(_read_all(sock) == b"" for sock in silent)  # TLS handshake deadline

    assert _health(server, sockets)[0] == 200


def test_keep_alive_connection_gets_the_header_timeout_between_requests(
    servers: Callable[..., RunningServer],
    data_dir: Path,
    sockets: list[socket.socket],
    impl_env: dict[str, str],
) -> None:
    # uvicorn's own keep-alive timer stops at the first byte of the next request.
    server = servers(data_dir, env=impl_env)
    sock = _tls(server, sockets)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert _read_response(sock)[0] == 200
    sock.sendall(HALF_HEAD)
    assert _read_all(sock) == b""


def test_cap_follows_the_open_file_limit() -> None:
    assert connection_cap(0, 1024) == (1024 - RESERVED_FDS) // 2
    assert connection_cap(0, 65536) == (65536 - RESERVED_FDS) // 2
    assert connection_cap(500, 1024) == 500
    with pytest.raises(ConfigError, match="max_connections 2000 does not fit"):
        connection_cap(2000, 1024)
    with pytest.raises(ConfigError, match="open-file limit"):
        connection_cap(0, 200)


def test_plain_http_connection_over_the_cap_gets_a_complete_503(
    servers: Callable[..., RunningServer],
    data_dir: Path,
    sockets: list[socket.socket],
    impl_env: dict[str, str],
) -> None:
    # Without TLS the refusal half-closes, so the 503 arrives even though the
    # client's request is never read.
    server = servers(data_dir, "--no-tls", env={**impl_env, "GITREG_MAX_CONNECTIONS": "2"})
    idle = [_connect(server, sockets) for _ in range(2)]
    for sock in idle:
        sock.sendall(HALF_HEAD)
    late = _connect(server, sockets)
    late.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    status, head, body = _read_response(late)
    assert status == 503
    _assert_busy(head, body)
    assert late.recv(1) == b""  # the server is done with it
    assert all(_read_all(sock) == b"" for sock in idle)


def test_worker_processes_apply_the_header_timeout(
    servers: Callable[..., RunningServer],
    data_dir: Path,
    sockets: list[socket.socket],
    impl_env: dict[str, str],
) -> None:
    server = servers(data_dir, "--workers", "2", env=impl_env)
    half_heads = [_tls(server, sockets) for _ in range(4)]  # spread over both workers
    for sock in half_heads:
        sock.sendall(HALF_HEAD)
    assert all(_read_all(sock) == b"" for sock in half_heads)


def test_a_cap_the_open_file_limit_cannot_hold_stops_serve(data_dir: Path) -> None:
    result = cli_process(
        data_dir,
        "serve",
        "--port",
        str(free_port()),
        env={"GITREG_MAX_CONNECTIONS": "100000000", "GITREG_LOG_FORMAT": "text"},
        check=False,
        timeout=30,
    )
    assert result.returncode != 0
    assert "gitreg: error: max_connections 100000000 does not fit the open-file limit" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def test_raise_fd_limit_lifts_the_soft_limit_to_the_hard_one() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 512:
        pytest.skip("needs a finite hard open-file limit above 512")
    code = (
        "import resource\n"
        "from gitreg.server.limits import raise_fd_limit\n"
        f"resource.setrlimit(resource.RLIMIT_NOFILE, (512, {hard}))\n"
        "print(raise_fd_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    assert out.stdout.split() == [str(hard), str(hard)]


def test_default_is_httptools_and_uvloop_and_the_options_pickle() -> None:
    limits = ConnectionLimits(max_connections=10, header_timeout=2.0)
    options = uvicorn_options(limits)
    assert issubclass(options["http"].func, HttpToolsProtocol)
    assert issubclass(options["http"].func, ConnectionLimitsMixin)
    loop = options["loop"]()
    try:
        assert isinstance(loop, uvloop.Loop) and isinstance(loop, TlsDeadlinesMixin)
        assert loop.tls_timeout == 2.0
    finally:
        loop.close()
    # `--workers N` sends them to worker processes pickled.
    again = pickle.loads(pickle.dumps(options))  # noqa: S301 (bytes made just above)
    assert again["http"].func is options["http"].func and again["http"].keywords == {
        "limits": limits
    }
    h11 = uvicorn_options(limits, "h11")
    assert h11["http"].func is LimitedH11Protocol and h11["loop"].func is LimitedEventLoop


def test_without_httptools_auto_falls_back_to_h11_with_one_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(server_limits, "_fast_missing", ImportError("No module named 'uvloop'"))
    limits = ConnectionLimits(max_connections=10, header_timeout=2.0)
    with caplog.at_level(logging.WARNING, logger="gitreg.server"):
        options = uvicorn_options(limits, "auto")
    assert options["http"].func is LimitedH11Protocol
    assert options["loop"].func is LimitedEventLoop
    assert [r.getMessage() for r in caplog.records] == [
        "httptools/uvloop unavailable (No module named 'uvloop'): serving with h11/asyncio"
    ]
    with pytest.raises(ConfigError, match="http_impl httptools: No module named 'uvloop'"):
        uvicorn_options(limits, "httptools")
    with pytest.raises(ConfigError, match="http_impl must be one of"):
        uvicorn_options(limits, "fast")

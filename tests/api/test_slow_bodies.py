"""Slow request bodies cannot take the server down (docs/deployment.md, "Slow
clients and open files").

A real `gitreg serve` over TLS. Clients declare a body and then send it a byte
at a time: the server answers 408 and closes the connection, on the routes
anyone may post to and on provider uploads; an upload that keeps up the
minimum rate passes though it takes longer than `header_timeout`; and one
client address gets only its share of the connection cap, so health checks
from another address (127.0.0.2: Linux routes all of 127/8 to the loopback)
keep answering while it holds its share.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from gitreg.server.limits import client_key, client_share
from tests.api.test_slow_clients import _assert_busy, _read_response
from tests.support.server import RunningServer, cli

pytestmark = pytest.mark.slow

HEADER_TIMEOUT = 2
MIN_RATE = 64 * 1024
DEADLINE_ENV = {"GITREG_HEADER_TIMEOUT": str(HEADER_TIMEOUT), "GITREG_MIN_BODY_RATE": str(MIN_RATE)}
# A bounded wait for anything the server should do within about HEADER_TIMEOUT.
WAIT = HEADER_TIMEOUT + 10
PROVIDER = "/api/v1/providers/acme/null/1.2.0/uploads"
PACKAGE = "terraform-provider-null_1.2.0_linux_amd64.zip"


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def _tls(
    server: RunningServer, opened: list[socket.socket], source: str = "127.0.0.1"
) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", server.port), WAIT, (source, 0))
    opened.append(raw)
    sock = server.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")
    opened.append(sock)
    return sock


def _head(method: str, path: str, length: int, content_type: str, token: str = "") -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: 127.0.0.1",
        f"Content-Type: {content_type}",
        f"Content-Length: {length}",
        *([f"Authorization: Bearer {token}"] if token else []),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _send_paced(sock: ssl.SSLSocket, piece: bytes, every: float, total: int) -> bytes:
    """Send `total` bytes as `piece`s, one every `every` seconds, until the
    server answers; what it answered (everything up to its close). Fails if
    that takes WAIT seconds longer than the body or its deadline at this rate."""
    sent, answer = 0, b""
    rate = len(piece) / every
    due = total / rate
    if rate < MIN_RATE:  # HEADER_TIMEOUT + received / MIN_RATE runs out
        due = min(due, HEADER_TIMEOUT / (1 - rate / MIN_RATE))
    deadline = time.monotonic() + WAIT + due
    while time.monotonic() < deadline:
        sock.settimeout(every)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            if sent < total:
                sock.settimeout(WAIT)
                with contextlib.suppress(OSError):  # closed under us: read the answer
                    sock.sendall(piece[: total - sent])
                sent += len(piece)
            continue
        except (ConnectionResetError, ssl.SSLError):
            return answer
        if not chunk:
            return answer
        answer += chunk
    raise AssertionError(f"the server kept the connection past the deadline: {answer!r}")


def _complete(answer: bytes) -> bool:
    head, _, body = answer.lower().partition(b"\r\n\r\n")
    length = head.partition(b"content-length: ")[2].partition(b"\r\n")[0]
    return length.isdigit() and len(body) >= int(length)


def _status_and_body(answer: bytes) -> tuple[int, bytes, dict[str, list[str]]]:
    assert _complete(answer), answer
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head.lower(), json.loads(body)


def _assert_timed_out(answer: bytes) -> None:
    status, head, body = _status_and_body(answer)
    assert status == 408, answer
    assert b"connection: close" in head
    assert body["errors"][0].startswith("request body too slow"), body


@pytest.mark.parametrize(
    ("path", "content_type", "impl"),
    [
        ("/webhooks/github", "application/json", "httptools"),
        ("/webhooks/github", "application/json", "h11"),
        ("/webhooks/bitbucket", "application/json", "httptools"),
        ("/ui/token", "application/x-www-form-urlencoded", "httptools"),
    ],
)
def test_a_trickled_body_gets_408_and_its_connection_is_closed(
    servers: Callable[..., RunningServer],
    data_dir: Path,
    sockets: list[socket.socket],
    path: str,
    content_type: str,
    impl: str,
) -> None:
    server = servers(data_dir, env={**DEADLINE_ENV, "GITREG_HTTP_IMPL": impl})
    sock = _tls(server, sockets)
    sock.sendall(_head("POST", path, 100_000, content_type))
    _assert_timed_out(_send_paced(sock, b"{", every=0.5, total=100_000))
    deadline = time.monotonic() + WAIT  # the access line, written after the answer
    while '"status":408' not in server.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert '"status":408' in server.log()


def _publish_token(server: RunningServer) -> str:
    created = cli(server.data_dir, "token", "create", "--scope", "publish", "--namespace", "acme")
    return created.stdout.split()[-1]


def _upload_url(server: RunningServer, token: str, sockets: list[socket.socket]) -> str:
    sock = _tls(server, sockets)
    sock.sendall(_head("POST", PROVIDER, 0, "application/json", token))
    status, _, body = _read_response(sock)
    assert status == 201, body
    url: str = json.loads(body)["url"]
    return urlsplit(url).path


def test_an_upload_at_an_ordinary_rate_passes_and_one_below_the_minimum_rate_is_cut(
    servers: Callable[..., RunningServer], data_dir: Path, sockets: list[socket.socket]
) -> None:
    # Scaled down: a 2 MiB upload at 512 KiB/s, 8 times the minimum rate, takes
    # twice HEADER_TIMEOUT, as a 200 MB one at 1 MB/s takes minutes.
    server = servers(data_dir, env=DEADLINE_ENV)
    token = _publish_token(server)
    size = 2 * 1024 * 1024
    ordinary = _tls(server, sockets)
    ordinary.sendall(
        _head("PUT", f"{_upload_url(server, token, sockets)}/{PACKAGE}", size, "x", token)
    )
    status, _, body = _status_and_body(_send_paced(ordinary, b"z" * 32768, 1 / 16, size))
    assert (status, body) == (201, {"filename": PACKAGE, "size": size})

    slow = _tls(server, sockets)  # 8 KiB/s: an eighth of the minimum
    slow.sendall(_head("PUT", f"{_upload_url(server, token, sockets)}/{PACKAGE}", size, "x", token))
    _assert_timed_out(_send_paced(slow, b"z" * 4096, 0.5, size))


def _held(server: RunningServer, sockets: list[socket.socket], count: int) -> list[ssl.SSLSocket]:
    """`count` connections from 127.0.0.1, each with a webhook body begun."""
    held = []
    for _ in range(count):
        sock = _tls(server, sockets)
        sock.sendall(_head("POST", "/webhooks/github", 100_000, "application/json") + b"{")
        held.append(sock)
    return held


def _health_from(server: RunningServer, sockets: list[socket.socket], source: str) -> int:
    sock = _tls(server, sockets, source)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    status, head, body = _read_response(sock)
    if status == 503:
        _assert_busy(head, body)
    return status


def _answered(socks: list[ssl.SSLSocket], count: int) -> dict[ssl.SSLSocket, bytes]:
    """The sockets of `socks` with a complete answer, once `count` have one (or
    WAIT has passed), and their answers. A readable TLS socket may only have
    received a session ticket: a non-blocking read tells."""
    buffers = dict.fromkeys(socks, b"")
    done: dict[ssl.SSLSocket, bytes] = {}
    deadline = time.monotonic() + WAIT
    for sock in socks:
        sock.setblocking(False)
    while len(done) < count and time.monotonic() < deadline:
        for sock in select.select([s for s in socks if s not in done], [], [], 1)[0]:
            with contextlib.suppress(ssl.SSLWantReadError):
                buffers[sock] += sock.recv(65536)
            if _complete(buffers[sock]):
                done[sock] = buffers[sock]
    for sock in socks:
        sock.settimeout(WAIT)
    return done


@pytest.mark.parametrize("impl", ["httptools", "h11"])
def test_one_address_holds_only_its_share_while_another_is_still_served(
    servers: Callable[..., RunningServer],
    data_dir: Path,
    sockets: list[socket.socket],
    impl: str,
) -> None:
    # The bodies' deadline is long here, so that the share alone keeps room.
    cap, share = 20, 5
    env = {
        "GITREG_MAX_CONNECTIONS": str(cap),
        "GITREG_HEADER_TIMEOUT": "60",
        "GITREG_HTTP_IMPL": impl,
    }
    server = servers(data_dir, env=env)
    held = _held(server, sockets, cap + 5)
    refused = _answered(held, cap)
    for answer in refused.values():
        head, _, body = answer.partition(b"\r\n\r\n")
        _assert_busy(head.lower(), body)
    held = [sock for sock in held if sock not in refused]
    assert len(held) == share

    for _ in range(5):
        assert _health_from(server, sockets, "127.0.0.2") == 200
        for sock in held:
            sock.sendall(b" ")  # still trickling
    assert _health_from(server, sockets, "127.0.0.1") == 503
    for sock in held:  # still open, and not answered
        sock.setblocking(False)
        with pytest.raises(ssl.SSLWantReadError):
            sock.recv(1)
    assert "refusing connections from 127.0.0.1" in server.log()


def test_the_share_defaults_to_a_quarter_of_the_cap_and_counts_ipv6_by_its_64() -> None:
    assert client_share(0, 200, behind_proxy=False) == 50
    assert client_share(0, 2, behind_proxy=False) == 1
    assert client_share(0, 200, behind_proxy=True) == 200  # a proxy is one address
    assert client_share(30, 200, behind_proxy=False) == 30
    assert client_share(500, 200, behind_proxy=True) == 200
    assert client_key(("203.0.113.7", 443)) == "203.0.113.7"
    assert client_key(("2001:db8:1:2:aaaa::1", 443, 0, 0)) == "2001:db8:1:2::/64"
    assert client_key(("2001:db8:1:2:bbbb::9", 443, 0, 0)) == "2001:db8:1:2::/64"
    assert client_key(("::ffff:203.0.113.7", 443, 0, 0)) == "203.0.113.7"
    assert client_key(None) == client_key("/run/gitreg.sock") == ""

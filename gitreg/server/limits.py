"""Keep slow or idle clients from taking the server down (docs/deployment.md,
"Slow clients and open files").

uvicorn gives a connection no deadline until its first response is sent: a
client that never completes its request head (or, over TLS, never finishes the
handshake) keeps its file descriptor for good, and enough of them make
`accept()` fail for everyone. `limit_concurrency` does not help: it answers 503
only once a request head has arrived. Here:

- `ConnectionLimitsMixin`, on uvicorn's httptools protocol (the default)
  and on its h11 one, refuses a connection over `max_connections`,
  or over `max_per_client` from one client address, at once with a complete
  503, and closes one whose request head is not complete within
  `header_timeout` seconds (after connecting, and after each response);
- `TlsDeadlinesMixin`, on uvloop's loop (the default) and on asyncio's, gives
  TLS handshakes and TLS shutdowns that same deadline (the defaults are 60 s
  and 30 s);
- `raise_fd_limit` and `connection_cap` keep the cap under the process's
  file-descriptor limit.

The classes reach uvicorn as `functools.partial` objects, which pickle, so
`--workers N` processes get the same limits. The cap counts per process, as
the file-descriptor limit does.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import ipaddress
import json
import logging
import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from gitreg.errors import ConfigError
from gitreg.settings import HTTP_IMPLS

logger = logging.getLogger("gitreg.server")

# Descriptors gitreg needs besides client sockets: SQLite (database, WAL and
# shared memory per thread), blobs being streamed, git packs, job threads, logs.
RESERVED_FDS = 256
RETRY_AFTER_SECONDS = 1


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int
    header_timeout: float
    # Connections one client address may hold at once (`client_key`); 0: as
    # many as the cap.
    max_per_client: int = 0


def _busy_response() -> bytes:
    body = json.dumps({"errors": ["too many open connections; retry shortly"]}).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        f"retry-after: {RETRY_AFTER_SECONDS}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


BUSY_RESPONSE = _busy_response()


def raise_fd_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:  # e.g. a sandbox refusing it
            logger.warning("could not raise the open-file limit to %d: %s", hard, exc)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def connection_cap(configured: int, fd_limit: int) -> int:
    """The cap in force: `configured`, or 0 for one derived from `fd_limit`.

    The derived cap leaves RESERVED_FDS for gitreg's own files and half of the
    rest for sockets the cap cannot count yet: TLS handshakes in progress and
    connections being refused, each bounded by `header_timeout`.
    """
    room = fd_limit - RESERVED_FDS
    if configured == 0:
        if room < 2:
            raise ConfigError(
                f"the open-file limit ({fd_limit}) is too low to serve; raise it "
                "(ulimit -n, or LimitNOFILE= in the systemd unit)"
            )
        return room // 2
    if configured > room:
        raise ConfigError(
            f"max_connections {configured} does not fit the open-file limit {fd_limit} "
            f"(gitreg keeps {RESERVED_FDS} for its own files): lower max_connections "
            "or raise the limit (ulimit -n, or LimitNOFILE= in the systemd unit)"
        )
    return configured


def client_share(configured: int, cap: int, behind_proxy: bool) -> int:
    """Connections one client address may hold: `configured`, or 0 for a quarter
    of `cap`; behind a proxy (`trust_forwarded`) every connection comes from the
    proxy's address, so there the derived share is the whole cap."""
    if configured == 0:
        return cap if behind_proxy else max(1, cap // 4)
    return min(configured, cap)


def client_key(peername: Any) -> str:
    """What a connection counts against in `max_per_client`: its IPv4 address,
    or its IPv6 /64 (one host is commonly given a whole /64, so single IPv6
    addresses would let it past the share); "" where there is none."""
    if not isinstance(peername, tuple) or not peername or not isinstance(peername[0], str):
        return ""
    host = peername[0]
    if ":" not in host:
        return host
    try:
        address = ipaddress.IPv6Address(host.partition("%")[0])
    except ValueError:
        return host
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.IPv6Network((address, 64), strict=False))


# Connections open per client address in this process, with the limits above.
_per_client: dict[str, int] = {}
_last_refusal_warning: dict[str, float] = {}


def _warn_refused(open_connections: int, client: str | None) -> None:
    """Log refusals at most every 10 s per limit: a flood must not become a log flood."""
    now = time.monotonic()
    limit = "max_connections" if client is None else "max_connections_per_client"
    if now - _last_refusal_warning.get(limit, -10.0) >= 10:
        _last_refusal_warning[limit] = now
        source = "" if client is None else f" from {client}"
        logger.warning("refusing connections%s: %d open (%s)", source, open_connections, limit)


if TYPE_CHECKING:
    # What the mixins below use of uvicorn's protocols (h11 and httptools have
    # the same attributes, with different cycle types) and of event loops
    # (uvloop's stubs and typeshed's disagree on unrelated methods).

    class _ProtocolBase(asyncio.Protocol):
        connections: set[Any]
        cycle: Any
        loop: asyncio.AbstractEventLoop
        transport: asyncio.Transport

        def __init__(self, *args: Any, **kwargs: Any) -> None: ...
        def on_response_complete(self) -> None: ...

    class _LoopBase:
        async def create_server(self, *args: Any, **kwargs: Any) -> asyncio.Server: ...

else:
    _ProtocolBase = object
    _LoopBase = object


# What a TLS connection may hold in encrypted bytes not yet taken by its socket
# before the app's next write waits (uvloop's default is 512 KiB): one blob piece
# (gitreg/api/blob_file.py).
TLS_WRITE_HIGH_WATER = 64 * 1024


def bound_tls_writes(transport: asyncio.Transport) -> None:
    """Make the app wait once a TLS connection's socket is full instead of
    encrypting up to 512 KiB more into OpenSSL's memory buffer, which then keeps
    that size for the connection's life: a download to a client slower than the
    disk would hold that much memory on each connection, for no gain in CPU
    (docs/performance.md, "Archives over TLS: where the CPU goes")."""
    transport.set_write_buffer_limits(high=TLS_WRITE_HIGH_WATER)


class ConnectionLimitsMixin(_ProtocolBase):
    """A connection cap and a request-head deadline for one of uvicorn's HTTP
    protocols (h11 or httptools): both keep `connections`, `cycle`, `loop` and
    `transport`, and call `on_response_complete` after each response."""

    def __init__(self, *args: Any, limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.refused = False
        # The `client_key` this connection counts against, once it does.
        self.counted_as: str | None = None
        self.head_timer: asyncio.TimerHandle | None = None
        # Loop time by which the request head must be complete; None: no
        # deadline. Moving it does not move the timer: the timer, when it
        # fires, sets itself again for a later deadline, so a busy keep-alive
        # connection costs one timer per `header_timeout` rather than a
        # call_later and a cancel per request (docs/performance.md).
        self.head_deadline: float | None = None
        # The request cycle in progress when the deadline was armed; a new one
        # means a complete request head has arrived since.
        self.cycle_at_arming: Any = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limits.max_connections:
            self._refuse(transport, len(self.connections), None)
            return
        client = client_key(transport.get_extra_info("peername"))
        held = _per_client.get(client, 0)
        if self.limits.max_per_client and held >= self.limits.max_per_client:
            self._refuse(transport, held, client)
            return
        _per_client[client] = held + 1
        self.counted_as = client
        super().connection_made(transport)
        if transport.get_extra_info("ssl_object") is not None:
            bound_tls_writes(transport)
        self._arm_head_deadline()

    def _refuse(self, transport: asyncio.Transport, held: int, client: str | None) -> None:
        """Answer 503 without reading anything or running the app."""
        self.refused = True
        self.transport = transport
        _warn_refused(held, client)
        transport.write(BUSY_RESPONSE)
        # Closing now, with the client's request unread, would send a reset
        # that can destroy the 503 in flight (and a TLS close_notify crossing
        # the request is an error too): say we are done where TCP allows, let
        # the client close (eof_received), and cut it off at the deadline.
        if transport.can_write_eof():
            transport.write_eof()
        self.head_timer = self.loop.call_later(self.limits.header_timeout, transport.abort)

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        super().data_received(data)
        if self.head_deadline is not None and self.cycle is not self.cycle_at_arming:
            self.head_deadline = None

    def on_response_complete(self) -> None:
        finished = self.cycle
        super().on_response_complete()
        # A pipelined request may already have started a new cycle.
        if not self.transport.is_closing() and self.cycle is finished:
            self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None
        self.head_deadline = None
        if self.counted_as is not None:
            left = _per_client[self.counted_as] - 1
            if left:
                _per_client[self.counted_as] = left
            else:
                del _per_client[self.counted_as]
            self.counted_as = None
        if not self.refused:
            super().connection_lost(exc)

    def _arm_head_deadline(self) -> None:
        self.cycle_at_arming = self.cycle
        self.head_deadline = self.loop.time() + self.limits.header_timeout
        if self.head_timer is None:
            self.head_timer = self.loop.call_at(self.head_deadline, self._head_deadline_reached)

    def _head_deadline_reached(self) -> None:
        self.head_timer = None
        deadline = self.head_deadline
        if deadline is None or self.transport.is_closing():
            return
        if self.loop.time() < deadline:  # moved since the timer was set
            self.head_timer = self.loop.call_at(deadline, self._head_deadline_reached)
            return
        # abort, not close: a client that stalls would also stall a TLS
        # close_notify exchange, and keep the descriptor meanwhile.
        self.transport.abort()


class LimitedH11Protocol(ConnectionLimitsMixin, H11Protocol):
    """uvicorn's h11 protocol (pure Python) with the limits."""


class TlsDeadlinesMixin(_LoopBase):
    """An event loop whose TLS servers give up on a handshake or shutdown after
    `tls_timeout` seconds (asyncio's and uvloop's defaults: 60 and 30; uvicorn
    sets neither)."""

    def __init__(self, tls_timeout: float) -> None:
        super().__init__()
        self.tls_timeout = tls_timeout

    async def create_server(self, *args: Any, **kwargs: Any) -> asyncio.Server:
        if kwargs.get("ssl") is not None:
            kwargs.setdefault("ssl_handshake_timeout", self.tls_timeout)
            kwargs.setdefault("ssl_shutdown_timeout", self.tls_timeout)
        return await super().create_server(*args, **kwargs)


class LimitedEventLoop(TlsDeadlinesMixin, asyncio.SelectorEventLoop):
    """asyncio's selector loop with the TLS deadlines."""


# httptools (C parser) and uvloop (libuv) where they import; at module level so
# that the `functools.partial` objects built on them pickle for `--workers N`.
_fast_missing: ImportError | None = None
try:
    import uvloop
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError as exc:  # PyPy, or a platform without wheels
    _fast_missing = exc
else:

    class LimitedHttpToolsProtocol(ConnectionLimitsMixin, HttpToolsProtocol):
        """uvicorn's httptools protocol with the limits."""

    # uvloop's stubs declare Loop against an older typeshed AbstractEventLoop, so
    # mypy finds signature clashes in any subclass; none concerns this one.
    class LimitedUvloop(TlsDeadlinesMixin, uvloop.Loop):  # type: ignore[misc]
        """uvloop with the TLS deadlines; its create_server takes the same
        ssl_handshake_timeout and ssl_shutdown_timeout as asyncio's."""


def uvicorn_options(limits: ConnectionLimits, http_impl: str = "auto") -> dict[str, Any]:
    """`http` and `loop` options for uvicorn.run; both pickle for worker processes.

    "auto" takes httptools + uvloop (faster than h11 + asyncio,
    docs/performance.md) and falls back to h11 + asyncio,
    with one log line, where they cannot be imported.
    """
    if http_impl not in HTTP_IMPLS:
        raise ConfigError(f"http_impl must be one of {', '.join(HTTP_IMPLS)}, got {http_impl!r}")
    protocol: Callable[..., asyncio.Protocol] = LimitedH11Protocol
    loop: Callable[[float], asyncio.AbstractEventLoop] = LimitedEventLoop
    if http_impl != "h11" and _fast_missing is None:
        protocol, loop = LimitedHttpToolsProtocol, LimitedUvloop
    elif http_impl == "httptools":
        raise ConfigError(f"http_impl httptools: {_fast_missing} (pip install httptools uvloop)")
    elif http_impl == "auto":
        logger.warning("httptools/uvloop unavailable (%s): serving with h11/asyncio", _fast_missing)
    return {
        "http": functools.partial(protocol, limits=limits),
        "loop": functools.partial(loop, limits.header_timeout),
    }


# glibc's mallopt parameter for the number of malloc arenas (malloc.h).
_M_ARENA_MAX = -8
MALLOC_ARENAS = 2


def limit_malloc_arenas() -> bool:
    """Two malloc arenas for this process, before its threads start. glibc
    gives each thread that allocates an arena of its own, up to 8 per core,
    and memory freed there stays with that thread: a worker's thread pool,
    filling cache misses, leaves more resident this way (bench/rss.py,
    docs/performance.md). Python holds the GIL while it allocates, so threads
    hardly contend for the two. False where the C library is not glibc; the
    MALLOC_ARENA_MAX environment variable, when set, is left to decide."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_ARENA_MAX, MALLOC_ARENAS))
    except (OSError, AttributeError):  # not glibc (musl, macOS)
        return False

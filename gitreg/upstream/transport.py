"""httpcore's network backend over asyncio streams, for the upstream client
(gitreg/upstream/client.py).

httpx's default backend (anyio) decrypts TLS one record at a time: every 16 KiB
of a mirrored zip would go through a read with its own timeout scope, an
SSLObject call and an h11 event. asyncio's own TLS transport (uvloop's in
`gitreg serve`) decrypts every record that arrived into the stream buffer in
one go, so each read here takes up to httpcore's 64 KiB at once, for much less
CPU per GB (docs/performance.md, "Mirror").

Failures are raised as the httpcore exceptions the anyio backend raises for
them, so httpx maps them as it maps anyio's (timeouts, connection and TLS errors).
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import ssl
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpcore

# The stream buffer's high-water mark: a 64 KiB read never waits on a paused transport.
BUFFER = 1024 * 1024


@contextlib.asynccontextmanager
async def _mapped(
    timeout: float | None, on_timeout: type[Exception], on_error: type[Exception]
) -> AsyncIterator[None]:
    try:
        async with asyncio.timeout(timeout):
            yield
    except TimeoutError as exc:
        raise on_timeout(str(exc) or "timed out") from exc
    except (OSError, ssl.SSLError, EOFError) as exc:  # SSLError: an OSError too
        raise on_error(str(exc) or type(exc).__name__) from exc


class AsyncioStream(httpcore.AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        async with _mapped(timeout, httpcore.ReadTimeout, httpcore.ReadError):
            return await self._reader.read(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        async with _mapped(timeout, httpcore.WriteTimeout, httpcore.WriteError):
            self._writer.write(buffer)
            await self._writer.drain()

    async def aclose(self) -> None:
        # As httpcore's anyio backend closes (its TLS streams are not "standard
        # compatible"): at once, without waiting for the peer's close_notify, and
        # the socket is closed before this returns (no transport left to a loop
        # that may end next).
        self._writer.transport.abort()
        with contextlib.suppress(OSError, ssl.SSLError):
            await self._writer.wait_closed()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        async with _mapped(timeout, httpcore.ConnectTimeout, httpcore.ConnectError):
            try:
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
            except BaseException:
                self._writer.close()
                raise
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "socket":
            return self._writer.get_extra_info("socket")
        if info == "is_readable":
            # httpcore asks this of an idle pooled connection: readable means the
            # server closed it (or sent something unasked), so it is not reused.
            return self._reader.at_eof() or _socket_readable(self._writer)
        return None


def _socket_readable(writer: asyncio.StreamWriter) -> bool:
    sock = writer.get_extra_info("socket")
    if sock is None or sock.fileno() < 0:
        return True
    poll = select.poll()
    poll.register(sock.fileno(), select.POLLIN)
    return bool(poll.poll(0))


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        local = None if local_address is None else (local_address, 0)
        async with _mapped(timeout, httpcore.ConnectTimeout, httpcore.ConnectError):
            # (uvloop's create_connection has no happy_eyeballs_delay: addresses
            # are tried in turn, as asyncio does without it)
            reader, writer = await asyncio.open_connection(
                host, port, local_addr=local, limit=BUFFER
            )
        sock = writer.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as anyio does
        return AsyncioStream(reader, writer)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        async with _mapped(timeout, httpcore.ConnectTimeout, httpcore.ConnectError):
            reader, writer = await asyncio.open_unix_connection(path, limit=BUFFER)
        return AsyncioStream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

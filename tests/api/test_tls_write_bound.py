"""A TLS connection holds at most about one blob piece of encrypted bytes its
socket has not taken before the app's next write waits (gitreg/server/limits.py
`bound_tls_writes`): with uvloop's default, 512 KiB kept in OpenSSL's memory
buffer for the connection's life, every download to a slow client would add to a
worker's memory (docs/performance.md, "Memory of one worker")."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import uvloop

from gitreg.server.limits import (
    TLS_WRITE_HIGH_WATER,
    ConnectionLimits,
    ConnectionLimitsMixin,
    bound_tls_writes,
)
from gitreg.server.tls import ensure_local_tls


class _Transport(asyncio.Transport):
    def __init__(self, tls: bool) -> None:
        super().__init__()
        self.tls = tls
        self.high: int | None = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return object() if name == "ssl_object" and self.tls else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.high = high

    def is_closing(self) -> bool:
        return False


class _Server(asyncio.Protocol):
    """The attributes the mixin reads from uvicorn's protocols."""

    transport: asyncio.Transport

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.connections: set[Any] = set()
        self.cycle: Any = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport

    def on_response_complete(self) -> None:
        pass


class _Limited(ConnectionLimitsMixin, _Server):
    pass


def test_tls_connections_get_the_bound_and_plain_ones_keep_theirs() -> None:
    loop = asyncio.new_event_loop()
    try:
        limits = ConnectionLimits(max_connections=10, header_timeout=5)
        for tls in (True, False):
            transport = _Transport(tls)
            protocol = _Limited(loop, limits=limits)
            protocol.connection_made(transport)
            assert transport.high == (TLS_WRITE_HIGH_WATER if tls else None)
            protocol.connection_lost(None)
    finally:
        loop.close()


def test_uvloop_tls_transport_applies_the_bound(tmp_path: Path) -> None:
    """On uvloop's own TLS transport (which is no asyncio.WriteTransport) the
    bound replaces the 512 KiB default."""
    made = ensure_local_tls(tmp_path, ["127.0.0.1"])
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(made.cert, made.key)
    client_context = ssl.create_default_context(cafile=str(made.ca_cert))
    seen: list[tuple[int, int]] = []

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert transport.get_extra_info("ssl_object") is not None
            bound_tls_writes(transport)  # type: ignore[arg-type]
            seen.append(transport.get_write_buffer_limits())  # type: ignore[attr-defined]
            transport.close()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Probe, "127.0.0.1", 0, ssl=server_context)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_context, server_hostname="127.0.0.1"
        )
        await reader.read()
        writer.close()
        server.close()
        await server.wait_closed()

    uvloop.run(main())
    assert seen and seen[0][1] == TLS_WRITE_HIGH_WATER

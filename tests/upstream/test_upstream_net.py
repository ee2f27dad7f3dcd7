"""The upstream client on asyncio's own streams (gitreg/upstream/transport.py): reads
take every TLS record that arrived, not one at a time, over a real TLS server."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import httpx
import pytest

from gitreg.errors import UpstreamError
from gitreg.upstream.client import HttpLimits, UpstreamHttp, _asyncio_transport
from gitreg.upstream.transport import AsyncioBackend
from tests.support.fake_upstream import FakeUpstream, serve_tls

TLS_RECORD = 16 * 1024  # the most one TLS record carries (RFC 8446, 5.1)
LIMITS = HttpLimits(5, 5, 30, 4, "test")


def test_the_upstream_client_runs_on_asyncio_streams() -> None:
    async def backend() -> object:
        upstream = UpstreamHttp(LIMITS, ssl_context=ssl.create_default_context())
        try:
            client = upstream._state().client
            assert client is not None
            transport = client._transport
            assert isinstance(transport, httpx.AsyncHTTPTransport)
            return transport._pool._network_backend
        finally:
            await upstream.aclose()

    assert isinstance(asyncio.run(backend()), AsyncioBackend)


def test_a_read_takes_every_record_that_arrived(tmp_path: Path) -> None:
    fake = FakeUpstream()
    fake.add("hashicorp", "big", ["1.0.0"], noise=3_000_000)
    with serve_tls(fake, tmp_path / "tls") as served:
        url = f"{served.url}/files/hashicorp/big/1.0.0/terraform-provider-big_1.0.0_linux_amd64.zip"
        context = ssl.create_default_context(cafile=str(served.ca_pem))

        async def pieces() -> list[int]:
            async with (
                httpx.AsyncClient(transport=_asyncio_transport(context)) as client,
                client.stream("GET", url) as response,
            ):
                await asyncio.sleep(0.5)  # let many records arrive before reading
                return [len(piece) async for piece in response.aiter_raw()]

        sizes = asyncio.run(pieces())
    assert sum(sizes) == len(fake.providers[("hashicorp", "big")]["1.0.0"].zips["linux_amd64"])
    assert max(sizes) > TLS_RECORD


def test_connection_failures_are_upstream_errors() -> None:
    async def fetch() -> None:
        upstream = UpstreamHttp(LIMITS, ssl_context=ssl.create_default_context())
        try:
            await upstream.get("https://127.0.0.1:1/x", "a test", 100)
        finally:
            await upstream.aclose()

    with pytest.raises(UpstreamError, match=r"cannot reach 127\.0\.0\.1:1"):
        asyncio.run(fetch())

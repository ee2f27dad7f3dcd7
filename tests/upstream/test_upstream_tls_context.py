"""An unpooled upstream client (the module proxy's) builds its TLS context
once, not per request: loading the CA bundle blocks the event loop
(docs/performance.md, "Mirror")."""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest

from gitreg.upstream import client as upstream_http
from gitreg.upstream.client import HttpLimits, UpstreamHttp


def test_the_tls_context_is_built_once_per_client_owner(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[ssl.SSLContext] = []

    def counting() -> ssl.SSLContext:
        built.append(ssl.create_default_context())
        return built[-1]

    monkeypatch.setattr(upstream_http, "outbound_ssl_context", counting)
    limits = HttpLimits(5.0, 5.0, 10.0, None, "test", pooled=False)
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=b"ok"))
    http = UpstreamHttp(limits, transport)

    async def twice() -> None:
        for _ in range(2):
            assert (await http.get("https://registry.example/x", "x", 100)).body == b"ok"

    asyncio.run(twice())
    assert len(built) == 1

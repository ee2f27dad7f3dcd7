"""The one outbound HTTPS client for upstream registries, shared by the provider
mirror (gitreg/mirror/upstream.py) and the module proxy
(gitreg/module_proxy/upstream.py), so both get the same hardening and count in
the same metrics (`gitreg_upstream_errors_total`,
`gitreg_mirror_upstream_bytes_total`; docs/operations.md).

Every request: https only, redirects included, and never to a
refused address (gitreg/upstream/hosts.py, as for git remotes); connect and
read timeouts plus a total deadline covering the wait for a free slot and the
body; a byte cap checked against Content-Length and again while reading;
optionally at most `concurrency` requests in flight per upstream host. An
answer is used only when it is of the expected kind: JSON documents must
say `application/json`, and a body shorter than its Content-Length is an
error, not a file.

Service discovery (spec: remote-service-discovery.md) is here too:
`/.well-known/terraform.json` names `providers.v1` or `modules.v1`, cached for
an hour on success.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urljoin, urlsplit

import anyio.to_thread
import certifi

from gitreg import __version__
from gitreg.errors import GitregError, UpstreamError, UpstreamNotFound, UpstreamTimeout
from gitreg.metrics import service as metrics
from gitreg.upstream.hosts import refused_address

if TYPE_CHECKING:
    # httpx (and click and pygments with it) is imported on a first upstream
    # request: a serving worker that never mirrors does not carry it (docs/performance.md)
    import httpx

MAX_JSON_BYTES = 4 * 1024 * 1024
DISCOVERY_TTL = 3600.0
CHUNK = 1024 * 1024

Progress = Callable[[int, int | None], None]


class Sink(Protocol):
    """Where a streamed body goes (a file, or a file that also hashes)."""

    def write(self, data: bytes, /) -> int: ...


@dataclass(frozen=True)
class HttpLimits:
    connect_timeout: float
    read_timeout: float
    total_timeout: float
    concurrency: int | None  # requests in flight per upstream host; None: no cap
    agent: str  # who is asking, for the User-Agent ("provider mirror")
    # One client per event loop, reused until `aclose`; False: one client per
    # request, closed with it, for owners that have no point to call `aclose`.
    pooled: bool = True


@dataclass(frozen=True)
class Answer:
    status: int
    headers: httpx.Headers
    url: str  # the final URL, after redirects: relative URLs in the body resolve against it
    body: bytes  # empty when the body went to a sink


@dataclass(frozen=True)
class _Request:
    """One GET as `UpstreamHttp.get` was asked for it."""

    url: str
    what: str  # what is fetched, for error messages ("versions of X")
    limit: int  # byte cap on the body
    sink: Sink | None
    progress: Progress | None
    accept: tuple[int, ...]  # the statuses that are an answer


def outbound_ssl_context() -> ssl.SSLContext:
    """Trust `SSL_CERT_FILE`/`SSL_CERT_DIR` when set, like the Terraform CLI (Go)
    does, so an internal CA can be used; otherwise the certifi bundle."""
    cafile = os.environ.get("SSL_CERT_FILE") or None
    capath = os.environ.get("SSL_CERT_DIR") or None
    if cafile or capath:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    return ssl.create_default_context(cafile=certifi.where())


def host_of(url: str) -> str:
    return urlsplit(url).netloc or url[:80]


def require_https(url: str) -> None:
    """Refuse a URL that is not https, or whose host is a refused address."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise UpstreamError(
            f"refused non-https upstream URL {url[:200]!r} (upstreams are https only)"
        )
    # An upstream's metadata names the hosts to fetch from; never a cloud
    # metadata service or similar (as for git remotes).
    address = refused_address(parts.hostname)
    if address is not None:
        raise UpstreamError(f"refused upstream URL {url[:200]!r}: address {address}")


class _LoopState:
    """Per-event-loop resources: an httpx client and the per-host semaphores."""

    def __init__(self, client: httpx.AsyncClient | None, concurrency: int | None) -> None:
        self.client = client
        self.concurrency = concurrency
        self.semaphores: dict[str, asyncio.Semaphore] = {}

    def slot(self, host: str) -> asyncio.Semaphore | contextlib.nullcontext[None]:
        if self.concurrency is None:
            return contextlib.nullcontext()
        if host not in self.semaphores:
            self.semaphores[host] = asyncio.Semaphore(self.concurrency)
        return self.semaphores[host]


class UpstreamHttp:
    def __init__(
        self,
        limits: HttpLimits,
        transport: httpx.AsyncBaseTransport | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.limits = limits
        self._transport = transport
        self._ssl = ssl_context
        self._states: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._discovered: dict[tuple[str, str], tuple[float, str]] = {}

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            for old in [k for k in self._states if k.is_closed()]:
                del self._states[old]
            client = self._new_client() if self.limits.pooled else None
            state = self._states[loop] = _LoopState(client, self.limits.concurrency)
        return state

    def _new_client(self) -> httpx.AsyncClient:
        import httpx

        o = self.limits
        if self._ssl is None:
            # Once per instance: loading the CA bundle blocks the event loop for
            # milliseconds (docs/performance.md, "Mirror"), and an unpooled owner
            # makes a client per request.
            self._ssl = outbound_ssl_context()
        return httpx.AsyncClient(
            transport=self._transport or _asyncio_transport(self._ssl),
            verify=self._ssl,
            timeout=httpx.Timeout(
                connect=o.connect_timeout,
                read=o.read_timeout,
                write=o.read_timeout,
                pool=o.total_timeout,
            ),
            follow_redirects=True,
            max_redirects=5,
            trust_env=False,
            headers={"User-Agent": f"gitreg/{__version__} ({o.agent})"},
            event_hooks={"request": [self._check_request]},
        )

    @contextlib.asynccontextmanager
    async def _client(self, state: _LoopState) -> AsyncIterator[httpx.AsyncClient]:
        if state.client is not None:
            yield state.client
        else:
            async with self._new_client() as client:
                yield client

    @staticmethod
    async def _check_request(request: httpx.Request) -> None:
        # Runs for redirects too: an https upstream cannot bounce us to http.
        require_https(str(request.url))

    async def aclose(self) -> None:
        state = self._states.pop(asyncio.get_running_loop(), None)
        if state is not None and state.client is not None:
            await state.client.aclose()

    async def get(
        self,
        url: str,
        what: str,
        limit: int,
        sink: Sink | None = None,
        progress: Progress | None = None,
        accept: tuple[int, ...] = (200,),
    ) -> Answer:
        """GET `url`, answered with a status in `accept`; with `sink`, the body
        goes there. Failures are counted by kind for `gitreg_upstream_errors_total`."""
        try:
            return await self._get_mapped(_Request(url, what, limit, sink, progress, accept))
        except (UpstreamError, UpstreamNotFound) as exc:
            metrics.upstream_error(_error_kind(exc))
            raise

    async def _get_mapped(self, request: _Request) -> Answer:
        """`get` with transport failures turned into UpstreamError."""
        import httpx

        require_https(request.url)
        state = self._state()
        host = host_of(request.url)
        what = request.what
        total = self.limits.total_timeout
        try:
            # The budget starts now: waiting for a free slot to a busy host uses
            # it up too, so a caller never waits longer than total_timeout.
            async with asyncio.timeout(total), state.slot(host), self._client(state) as client:
                return await _read(client, request)
        except TimeoutError as exc:
            raise UpstreamTimeout(
                f"{what}: {host} did not answer completely within {total:g}s"
                " (waiting for a free upstream slot included)"
            ) from exc
        except httpx.TimeoutException as exc:
            raise UpstreamTimeout(f"{what}: {host} timed out ({type(exc).__name__})") from exc
        except httpx.RemoteProtocolError as exc:
            raise UpstreamError(
                f"{what}: {host} broke off the answer (truncated body?): {exc}"
            ) from exc
        except httpx.TooManyRedirects as exc:
            raise UpstreamError(f"{what}: too many redirects from {host}") from exc
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise UpstreamError(f"{what}: cannot reach {host}: {reason}") from exc
        except ssl.SSLError as exc:
            raise UpstreamError(f"{what}: TLS with {host} failed: {exc}") from exc

    async def json(self, url: str, what: str) -> tuple[dict[str, Any], str]:
        """A JSON object from `url` (at most MAX_JSON_BYTES), and the final URL."""
        answer = await self.get(url, what, MAX_JSON_BYTES)
        try:
            return parse_json(url, what, answer.body, answer.headers), answer.url
        except UpstreamError:
            metrics.upstream_error("invalid")
            raise

    async def discover(self, hostname: str, base_url: str, service: str, offers: str) -> str:
        """The base URL of `service` ("providers.v1", "modules.v1") at `hostname`,
        whose discovery document is under `base_url`; absolute, https, ending in
        "/" (spec: remote-service-discovery.md). `offers` names the service in errors."""
        key = (hostname, service)
        found = self._discovered.get(key)
        if found and time.monotonic() - found[0] < DISCOVERY_TTL:
            return found[1]
        url = base_url + "/.well-known/terraform.json"
        data, final = await self.json(url, f"service discovery for {hostname}")
        named = data.get(service)
        if not isinstance(named, str) or not named:
            raise UpstreamError(f"{hostname} offers no {offers} (no {service})")
        base = urljoin(final, named)
        require_https(base)
        if not base.endswith("/"):
            base += "/"
        self._discovered[key] = (time.monotonic(), base)
        return base


async def _read(client: httpx.AsyncClient, request: _Request) -> Answer:
    url, what, limit, sink = request.url, request.what, request.limit, request.sink
    host = host_of(url)
    async with client.stream("GET", url) as response:
        if response.status_code == 404:
            raise UpstreamNotFound(f"{what}: {host} has none (404)")
        if response.status_code not in request.accept:
            raise UpstreamError(
                f"{what}: {host} answered HTTP {response.status_code}", kind="status"
            )
        declared = _content_length(response.headers)
        if declared is not None and declared > limit:
            raise UpstreamError(
                f"{what}: {declared} bytes is over the {limit} byte limit"
                f" (more than {limit} bytes are refused unread)",
                kind="too_large",
            )
        chunks: list[bytes] = []
        received = 0
        pipe = None if sink is None else _SinkPipe(sink, request.progress, declared)
        try:
            # Pieces as they come off the connection (no chunk size: httpx would hold
            # them back until a whole chunk arrived), so a mirror reader streaming
            # the file being written sees them at once (gitreg/mirror/fill.py).
            async for chunk in response.aiter_bytes():
                received += len(chunk)
                if received > limit:
                    raise UpstreamError(
                        f"{what}: more than {limit} bytes; stopped", kind="too_large"
                    )
                if pipe is None:
                    chunks.append(chunk)
                    if request.progress is not None:
                        request.progress(received, declared)
                else:
                    await pipe.put(chunk)
            if pipe is not None:
                await pipe.drain()
        finally:
            if pipe is not None:
                await pipe.settle()
            metrics.upstream_bytes(received)
        if declared is not None and received != declared:
            raise UpstreamError(
                f"{what}: truncated body from {host} ({received} of {declared} bytes)"
            )
        return Answer(response.status_code, response.headers, str(response.url), b"".join(chunks))


class _SinkPipe:
    """Writes a body to its sink on a worker thread, one batch in flight, while the
    event loop goes on reading: the writing and hashing of a 100 MB zip stay off the
    loop, pieces that arrive during a write are joined into the next batch, and at
    most `CHUNK` bytes wait in memory (more waits for the write in flight)."""

    def __init__(self, sink: Sink, progress: Progress | None, declared: int | None) -> None:
        self._sink = sink
        self._progress = progress
        self._declared = declared
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._written = 0
        self._writing: asyncio.Future[None] | None = None

    async def put(self, chunk: bytes) -> None:
        self._pending.append(chunk)
        self._pending_bytes += len(chunk)
        if self._writing is not None and (self._writing.done() or self._pending_bytes >= CHUNK):
            await self._writing  # raises what a write raised (a full disk)
            self._writing = None
        if self._writing is None and self._pending:
            self._writing = asyncio.ensure_future(self._write_pending())

    async def drain(self) -> None:
        """Every byte written (the writes finished)."""
        if self._writing is not None:
            await self._writing
            self._writing = None

    async def settle(self) -> None:
        """No write in flight any more, however reading ended: the caller may then
        close or remove the sink's file."""
        if self._writing is not None:
            await asyncio.wait([self._writing])  # waits without raising its outcome
            if not self._writing.cancelled():
                self._writing.exception()  # retrieved: reading's own error is the one raised

    async def _write_pending(self) -> None:
        """Write what waits, then what arrived meanwhile, until nothing waits: a
        piece never sits unwritten while the upstream pauses."""
        while self._pending:
            pending = self._pending
            batch = pending[0] if len(pending) == 1 else b"".join(pending)
            self._pending, self._pending_bytes = [], 0
            await anyio.to_thread.run_sync(self._sink.write, batch)
            self._written += len(batch)
            if self._progress is not None:
                self._progress(self._written, self._declared)


def _asyncio_transport(context: ssl.SSLContext) -> httpx.AsyncHTTPTransport:
    """httpx's transport with httpcore's pool on asyncio's own streams
    (gitreg/upstream/transport.py), which costs less CPU per mirrored zip. httpx
    takes no network backend, so its pool is replaced by one of the same settings
    (httpx's default limits, HTTP/1.1) built with it; httpx's exception mapping
    around the pool stays (tests/upstream/test_upstream_net.py checks both)."""
    import httpcore
    import httpx

    from gitreg.upstream.transport import AsyncioBackend

    transport = httpx.AsyncHTTPTransport(verify=context)
    limits = httpx.Limits()
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=context,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=AsyncioBackend(),
    )
    return transport


def parse_json(url: str, what: str, body: bytes, headers: httpx.Headers) -> dict[str, Any]:
    media = headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise UpstreamError(
            f"{what}: {host_of(url)} answered 200 with {media or 'no Content-Type'}"
            " instead of application/json (an error page?)"
        )
    return json_object(url, what, body)


def json_object(url: str, what: str, body: bytes) -> dict[str, Any]:
    """`body` as a JSON object, or UpstreamError saying why not."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UpstreamError(f"{what}: {host_of(url)} sent malformed JSON") from exc
    if not isinstance(data, dict):
        raise UpstreamError(f"{what}: {host_of(url)} sent JSON that is not an object")
    return data


def _error_kind(exc: GitregError) -> str:
    """A bounded label for a failed upstream request (docs/operations.md)."""
    if isinstance(exc, UpstreamTimeout):
        return "timeout"
    if isinstance(exc, UpstreamNotFound):
        return "not_found"
    cause = exc.__cause__
    if isinstance(cause, ssl.SSLError):
        return "tls"
    if isinstance(cause, _httpx_error()):
        return "network"
    return exc.kind if isinstance(exc, UpstreamError) else "invalid"


def _content_length(headers: httpx.Headers) -> int | None:
    """The declared body length; None when absent, malformed, or of an encoded
    body (httpx decodes it, so the bytes read differ from the header)."""
    value = headers.get("content-length")
    if value is None or headers.get("content-encoding"):
        return None
    try:
        return max(int(value), 0)
    except ValueError:
        return None


def _httpx_error() -> type[Exception] | tuple[()]:
    """httpx's base error once httpx is loaded; before, no error can be one."""
    httpx = sys.modules.get("httpx")
    return () if httpx is None else httpx.HTTPError

"""The outbound side of the mirror: talking to upstream provider registries.

    discovery  GET https://HOST/.well-known/terraform.json -> providers.v1
               (spec: remote-service-discovery.md; HOST may be mapped elsewhere)
    versions   GET <providers.v1>NAMESPACE/TYPE/versions
    download   GET <providers.v1>NAMESPACE/TYPE/VERSION/download/OS/ARCH
    files      SHA256SUMS, its signature and the zip, from the URLs it names

Every request (checklist M2): https only, redirects included; connect and read
timeouts plus a total deadline covering the wait for a free slot and the body;
a byte cap checked against Content-Length and again while reading; at most
`mirror_concurrency` requests in flight per upstream host. An answer is used
only when it is a 200 of the expected kind (M1): JSON documents must say
`application/json`, and a body shorter than its Content-Length is an error,
not a file.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urljoin, urlsplit

import anyio.to_thread
import certifi
import httpx

from gitreg import __version__, metrics
from gitreg.addresses import ProviderAddress, check_platform
from gitreg.errors import (
    BadRequest,
    ConstraintError,
    GitregError,
    UpstreamError,
    UpstreamNotFound,
    UpstreamTimeout,
)
from gitreg.hosts import refused_address
from gitreg.mirror.options import MirrorOptions
from gitreg.versions import parse_version

log = logging.getLogger("gitreg.mirror.upstream")

MAX_JSON_BYTES = 4 * 1024 * 1024
DISCOVERY_TTL = 3600.0
CHUNK = 1024 * 1024
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_FILENAME = re.compile(r"^[A-Za-z0-9._+-]{1,255}$")

Progress = Callable[[int, int | None], None]


class Sink(Protocol):
    """Where a streamed body goes (a file, or a file that also hashes)."""

    def write(self, data: bytes, /) -> int: ...


@dataclass(frozen=True)
class UpstreamVersion:
    version: str
    protocols: tuple[str, ...]
    platforms: tuple[str, ...]  # "os_arch"


@dataclass(frozen=True)
class DownloadInfo:
    """The upstream's answer for one package (spec: provider-registry-protocol.md,
    Find a Provider Package), with every URL made absolute."""

    platform: str
    filename: str
    download_url: str
    shasums_url: str
    shasums_signature_url: str
    shasum: str
    protocols: tuple[str, ...]
    public_keys: tuple[str, ...]  # ASCII-armored


def outbound_ssl_context() -> ssl.SSLContext:
    """Trust `SSL_CERT_FILE`/`SSL_CERT_DIR` when set, like the Terraform CLI (Go)
    does, so an internal CA can be used; otherwise the certifi bundle."""
    cafile = os.environ.get("SSL_CERT_FILE") or None
    capath = os.environ.get("SSL_CERT_DIR") or None
    if cafile or capath:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    return ssl.create_default_context(cafile=certifi.where())


def _host(url: str) -> str:
    return urlsplit(url).netloc or url[:80]


def _require_https(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise UpstreamError(f"refused non-https upstream URL {url[:200]!r} (mirror is https only)")
    # An upstream's metadata names the hosts to fetch from; never a cloud
    # metadata service or similar (as for git remotes, checklist G2).
    address = refused_address(parts.hostname)
    if address is not None:
        raise UpstreamError(f"refused upstream URL {url[:200]!r}: address {address}")


class _LoopState:
    """Per-event-loop resources: an httpx client and the per-host semaphores."""

    def __init__(self, client: httpx.AsyncClient, concurrency: int) -> None:
        self.client = client
        self.concurrency = concurrency
        self.semaphores: dict[str, asyncio.Semaphore] = {}

    def semaphore(self, host: str) -> asyncio.Semaphore:
        if host not in self.semaphores:
            self.semaphores[host] = asyncio.Semaphore(self.concurrency)
        return self.semaphores[host]


class UpstreamClient:
    def __init__(
        self,
        options: MirrorOptions,
        transport: httpx.AsyncBaseTransport | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.options = options
        self._transport = transport
        self._ssl = ssl_context
        self._states: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._discovered: dict[str, tuple[float, str]] = {}

    # -- plumbing -----------------------------------------------------------------------

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            for old in [k for k in self._states if k.is_closed()]:
                del self._states[old]
            o = self.options
            client = httpx.AsyncClient(
                transport=self._transport,
                verify=self._ssl or outbound_ssl_context(),
                timeout=httpx.Timeout(
                    connect=o.connect_timeout,
                    read=o.read_timeout,
                    write=o.read_timeout,
                    pool=o.total_timeout,
                ),
                follow_redirects=True,
                max_redirects=5,
                trust_env=False,
                headers={"User-Agent": f"gitreg/{__version__} (provider mirror)"},
                event_hooks={"request": [self._check_request]},
            )
            state = self._states[loop] = _LoopState(client, o.concurrency)
        return state

    @staticmethod
    async def _check_request(request: httpx.Request) -> None:
        # Runs for redirects too: an https upstream cannot bounce us to http.
        _require_https(str(request.url))

    async def aclose(self) -> None:
        state = self._states.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state.client.aclose()

    async def _get(
        self,
        url: str,
        what: str,
        limit: int,
        sink: Sink | None = None,
        progress: Progress | None = None,
    ) -> tuple[bytes, httpx.Headers, str]:
        """GET `url`: (body, headers, final URL); with `sink`, the body goes there.
        Failures are counted by kind for `gitreg_upstream_errors_total`."""
        try:
            return await self._get_mapped(url, what, limit, sink, progress)
        except (UpstreamError, UpstreamNotFound) as exc:
            metrics.upstream_error(_error_kind(exc))
            raise

    async def _get_mapped(
        self,
        url: str,
        what: str,
        limit: int,
        sink: Sink | None = None,
        progress: Progress | None = None,
    ) -> tuple[bytes, httpx.Headers, str]:
        """`_get` with transport failures turned into UpstreamError."""
        _require_https(url)
        state = self._state()
        host = _host(url)
        try:
            # The budget starts now: waiting for a free slot to a busy host uses
            # it up too, so a caller never waits longer than total_timeout.
            async with asyncio.timeout(self.options.total_timeout), state.semaphore(host):
                return await self._read(state.client, url, what, limit, sink, progress)
        except TimeoutError as exc:
            raise UpstreamTimeout(
                f"{what}: {host} did not answer completely within {self.options.total_timeout:g}s"
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

    async def _read(
        self,
        client: httpx.AsyncClient,
        url: str,
        what: str,
        limit: int,
        sink: Sink | None,
        progress: Progress | None,
    ) -> tuple[bytes, httpx.Headers, str]:
        host = _host(url)
        async with client.stream("GET", url) as response:
            if response.status_code == 404:
                raise UpstreamNotFound(f"{what}: {host} has none (404)")
            if response.status_code != 200:
                raise UpstreamError(
                    f"{what}: {host} answered HTTP {response.status_code}", kind="status"
                )
            declared = _content_length(response.headers)
            if declared is not None and declared > limit:
                raise UpstreamError(
                    f"{what}: {declared} bytes is over the {limit} byte limit", kind="too_large"
                )
            chunks: list[bytes] = []
            received = 0
            try:
                async for chunk in response.aiter_bytes(CHUNK):
                    received += len(chunk)
                    if received > limit:
                        raise UpstreamError(
                            f"{what}: more than {limit} bytes; stopped", kind="too_large"
                        )
                    if sink is None:
                        chunks.append(chunk)
                    else:
                        await anyio.to_thread.run_sync(sink.write, chunk)
                    if progress is not None:
                        progress(received, declared)
            finally:
                metrics.upstream_bytes(received)
            if (
                declared is not None
                and received != declared
                and not response.headers.get("content-encoding")
            ):
                raise UpstreamError(
                    f"{what}: truncated body from {host} ({received} of {declared} bytes)"
                )
            return b"".join(chunks), response.headers, str(response.url)

    async def _json(self, url: str, what: str) -> tuple[dict[str, Any], str]:
        body, headers, final = await self._get(url, what, MAX_JSON_BYTES)
        try:
            return _parse_json(url, what, body, headers), final
        except UpstreamError:
            metrics.upstream_error("invalid")
            raise

    # -- protocol -----------------------------------------------------------------------

    async def providers_base(self, hostname: str) -> str:
        """The `providers.v1` base URL of `hostname` (cached for an hour on success)."""
        found = self._discovered.get(hostname)
        if found and time.monotonic() - found[0] < DISCOVERY_TTL:
            return found[1]
        url = self.options.base_url(hostname) + "/.well-known/terraform.json"
        data, final = await self._json(url, f"service discovery for {hostname}")
        service = data.get("providers.v1")
        if not isinstance(service, str) or not service:
            raise UpstreamError(f"{hostname} offers no provider registry (no providers.v1)")
        base = urljoin(final, service)
        _require_https(base)
        if not base.endswith("/"):
            base += "/"
        self._discovered[hostname] = (time.monotonic(), base)
        return base

    async def versions(self, address: ProviderAddress) -> list[UpstreamVersion]:
        base = await self.providers_base(address.hostname)
        url = f"{base}{address.namespace}/{address.type}/versions"
        data, _ = await self._json(url, f"versions of {address}")
        raw = data.get("versions")
        if not isinstance(raw, list):
            raise UpstreamError(f"versions of {address}: the answer has no 'versions' list")
        found: dict[str, UpstreamVersion] = {}
        for entry in raw:
            parsed = _upstream_version(entry)
            if parsed is None:
                # Terraform fails a whole listing on one bad version; skipping it
                # keeps the rest installable (TERRAFORM-CLIENT.md, Providers).
                log.warning("%s: ignoring malformed version entry %.200r", address, entry)
                continue
            found.setdefault(parsed.version, parsed)
        return list(found.values())

    async def download(self, address: ProviderAddress, version: str, platform: str) -> DownloadInfo:
        base = await self.providers_base(address.hostname)
        os_, _, arch = platform.partition("_")
        url = f"{base}{address.namespace}/{address.type}/{version}/download/{os_}/{arch}"
        what = f"{address} {version} {platform}"
        data, final = await self._json(url, f"download metadata of {what}")
        return _download_info(data, final, os_, arch, what)

    async def fetch_small(self, url: str, what: str, limit: int) -> bytes:
        body, _, _ = await self._get(url, what, limit)
        return body

    async def fetch_to(
        self, url: str, what: str, limit: int, sink: Sink, progress: Progress | None = None
    ) -> httpx.Headers:
        _, headers, _ = await self._get(url, what, limit, sink, progress)
        return headers


def _parse_json(url: str, what: str, body: bytes, headers: httpx.Headers) -> dict[str, Any]:
    media = headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise UpstreamError(
            f"{what}: {_host(url)} answered 200 with {media or 'no Content-Type'}"
            " instead of application/json (an error page?)"
        )
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UpstreamError(f"{what}: {_host(url)} sent malformed JSON") from exc
    if not isinstance(data, dict):
        raise UpstreamError(f"{what}: {_host(url)} sent JSON that is not an object")
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
    if isinstance(cause, httpx.HTTPError):
        return "network"
    return exc.kind if isinstance(exc, UpstreamError) else "invalid"


def _content_length(headers: httpx.Headers) -> int | None:
    value = headers.get("content-length")
    if value is None or headers.get("content-encoding"):
        return None
    try:
        return max(int(value), 0)
    except ValueError:
        return None


def _upstream_version(entry: Any) -> UpstreamVersion | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("version"), str):
        return None
    try:
        version = str(parse_version(entry["version"]))
    except ConstraintError:
        return None
    protocols = entry.get("protocols") or []
    platforms: list[str] = []
    for item in entry.get("platforms") or []:
        if isinstance(item, dict) and isinstance(item.get("os"), str):
            try:
                platforms.append(check_platform(f"{item['os']}_{item.get('arch')}"))
            except BadRequest:  # a malformed platform entry is skipped, not fatal
                continue
    return UpstreamVersion(
        version,
        tuple(p for p in protocols if isinstance(p, str))[:16],
        tuple(dict.fromkeys(platforms)),
    )


def _download_info(
    data: dict[str, Any], final: str, os_: str, arch: str, what: str
) -> DownloadInfo:
    def text(key: str) -> str:
        value = data.get(key)
        if not isinstance(value, str) or not value:
            raise UpstreamError(f"download metadata of {what}: missing {key!r}")
        return value

    if data.get("os") != os_ or data.get("arch") != arch:
        raise UpstreamError(f"download metadata of {what}: os/arch do not match the request")
    filename = text("filename")
    if not _FILENAME.match(filename):
        raise UpstreamError(f"download metadata of {what}: unsafe filename {filename[:80]!r}")
    shasum = text("shasum").lower()
    if not _SHA256.match(shasum):
        raise UpstreamError(f"download metadata of {what}: shasum is not 64 hex digits")
    keys = data.get("signing_keys")
    gpg = keys.get("gpg_public_keys") if isinstance(keys, dict) else None
    armors = tuple(
        k["ascii_armor"]
        for k in gpg or []
        if isinstance(k, dict) and isinstance(k.get("ascii_armor"), str)
    )
    if not armors:
        raise UpstreamError(f"download metadata of {what}: no signing_keys.gpg_public_keys")
    keys_of_urls = ("download_url", "shasums_url", "shasums_signature_url")
    urls = [urljoin(final, text(k)) for k in keys_of_urls]
    for url in urls:
        _require_https(url)
    protocols = tuple(p for p in data.get("protocols") or [] if isinstance(p, str))[:16]
    return DownloadInfo(
        platform=f"{os_}_{arch}",
        filename=filename,
        download_url=urls[0],
        shasums_url=urls[1],
        shasums_signature_url=urls[2],
        shasum=shasum,
        protocols=protocols,
        public_keys=armors[:16],
    )

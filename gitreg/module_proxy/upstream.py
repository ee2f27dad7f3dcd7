"""The outbound side of the module proxy: an upstream module registry's API.

    discovery  GET https://HOST/.well-known/terraform.json -> modules.v1
               (spec: remote-service-discovery.md; HOST may be mapped to `url`)
    versions   GET <modules.v1>NAMESPACE/NAME/SYSTEM/versions
    download   GET <modules.v1>NAMESPACE/NAME/SYSTEM/VERSION/download
               -> 204 + X-Terraform-Get, or 200 {"location": ...}
               (module-registry-protocol.md)

The same rules as the provider mirror's requests (checklist M1, M2): https
only, redirects included, hosts on refused addresses never contacted, a byte
cap on every body, connect/read timeouts and a total deadline, and JSON only
when the answer says `application/json`.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, BinaryIO
from urllib.parse import urljoin, urlsplit

import anyio.to_thread
import httpx

from gitreg import __version__
from gitreg.errors import NotAVersion, UpstreamError, UpstreamNotFound, UpstreamTimeout
from gitreg.hosts import refused_address
from gitreg.mirror.upstream import outbound_ssl_context
from gitreg.module_proxy.config import ProxyOptions
from gitreg.versions import parse_version

MAX_JSON_BYTES = 4 * 1024 * 1024
DISCOVERY_TTL = 3600.0


def require_https(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise UpstreamError(f"refused non-https upstream URL {url[:200]!r}")
    address = refused_address(parts.hostname)
    if address is not None:
        raise UpstreamError(f"refused upstream URL {url[:200]!r}: address {address}")


async def _check_request(request: httpx.Request) -> None:
    require_https(str(request.url))  # redirects too: never bounced to http or metadata


class ModuleUpstream:
    def __init__(self, options: ProxyOptions, transport: httpx.AsyncBaseTransport | None = None):
        self.options = options
        self._transport = transport
        self._discovered: dict[str, tuple[float, str]] = {}

    def _client(self) -> httpx.AsyncClient:
        o = self.options
        return httpx.AsyncClient(
            transport=self._transport,
            verify=outbound_ssl_context(),
            timeout=httpx.Timeout(
                connect=o.connect_timeout, read=o.read_timeout, write=10, pool=10
            ),
            follow_redirects=True,
            max_redirects=5,
            trust_env=False,
            headers={"User-Agent": f"gitreg/{__version__} (module proxy)"},
            event_hooks={"request": [_check_request]},
        )

    async def _get(
        self,
        url: str,
        what: str,
        accept_204: bool = False,
        limit: int = MAX_JSON_BYTES,
        out: BinaryIO | None = None,
    ) -> httpx.Response:
        """GET `url`; the body is kept in the response, or written to `out`."""
        require_https(url)
        host = urlsplit(url).netloc
        try:
            async with (
                asyncio.timeout(self.options.total_timeout),
                self._client() as client,
                client.stream("GET", url) as response,
            ):
                if response.status_code == 404:
                    raise UpstreamNotFound(f"{what}: {host} has none (404)")
                if response.status_code not in ((200, 204) if accept_204 else (200,)):
                    raise UpstreamError(f"{what}: {host} answered HTTP {response.status_code}")
                body = bytearray()
                received = 0
                async for chunk in response.aiter_bytes():
                    received += len(chunk)
                    if received > limit:
                        raise UpstreamError(f"{what}: more than {limit} bytes; stopped")
                    if out is None:
                        body += chunk
                    else:
                        await anyio.to_thread.run_sync(out.write, chunk)
                response._content = bytes(body)
                return response
        except TimeoutError as exc:
            raise UpstreamTimeout(f"{what}: {host} did not answer in time") from exc
        except httpx.TimeoutException as exc:
            raise UpstreamTimeout(f"{what}: {host} timed out ({type(exc).__name__})") from exc
        except httpx.HTTPError as exc:
            raise UpstreamError(
                f"{what}: cannot reach {host}: {exc or type(exc).__name__}"
            ) from exc

    async def _json(self, url: str, what: str) -> tuple[dict[str, Any], str]:
        response = await self._get(url, what)
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            raise UpstreamError(f"{what}: answered {media or 'no Content-Type'}, not JSON")
        try:
            data = json.loads(response.content)
        except (ValueError, UnicodeDecodeError) as exc:
            raise UpstreamError(f"{what}: malformed JSON") from exc
        if not isinstance(data, dict):
            raise UpstreamError(f"{what}: JSON that is not an object")
        return data, str(response.url)

    async def modules_base(self, host: str) -> str:
        found = self._discovered.get(host)
        if found and time.monotonic() - found[0] < DISCOVERY_TTL:
            return found[1]
        url = self.options.base_url(host) + "/.well-known/terraform.json"
        data, final = await self._json(url, f"service discovery for {host}")
        service = data.get("modules.v1")
        if not isinstance(service, str) or not service:
            raise UpstreamError(f"{host} offers no module registry (no modules.v1)")
        base = urljoin(final, service)
        require_https(base)
        base = base if base.endswith("/") else base + "/"
        self._discovered[host] = (time.monotonic(), base)
        return base

    async def versions(self, host: str, module: str) -> list[str]:
        """Every valid version the upstream lists for `module` (NS/NAME/SYSTEM)."""
        base = await self.modules_base(host)
        data, _ = await self._json(f"{base}{module}/versions", f"versions of {module}")
        listed = data.get("modules")
        if not isinstance(listed, list) or not listed or not isinstance(listed[0], dict):
            raise UpstreamError(f"versions of {module}: the answer has no 'modules' list")
        found: list[str] = []
        for entry in listed[0].get("versions") or []:
            text = entry.get("version") if isinstance(entry, dict) else None
            try:
                version = str(parse_version(text)) if isinstance(text, str) else None
            except NotAVersion:
                version = None
            if version is not None and version not in found:
                found.append(version)
        return found

    async def location(self, host: str, module: str, version: str) -> str:
        """The upstream's download location for one version, made absolute."""
        base = await self.modules_base(host)
        url = f"{base}{module}/{version}/download"
        what = f"download of {module} {version}"
        response = await self._get(url, what, accept_204=True)
        location = response.headers.get("x-terraform-get")
        if not location and response.status_code == 200:
            try:
                data = json.loads(response.content)
            except (ValueError, UnicodeDecodeError) as exc:
                raise UpstreamError(f"{what}: malformed JSON") from exc
            location = data.get("location") if isinstance(data, dict) else None
        if not isinstance(location, str) or not location:
            raise UpstreamError(f"{what}: no X-Terraform-Get header or location")
        if location.startswith(("/", "./", "../")):
            # Relative to the download URL, as Terraform resolves it.
            location = urljoin(str(response.url), location)
        return location

    async def download_to(self, url: str, out: BinaryIO, limit: int) -> None:
        """A plain archive named by a module's location, at most `limit` bytes."""
        await self._get(url, f"archive {url[:200]}", limit=limit, out=out)

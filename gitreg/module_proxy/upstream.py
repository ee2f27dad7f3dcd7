"""The outbound side of the module proxy: an upstream module registry's API.

    discovery  GET https://HOST/.well-known/terraform.json -> modules.v1
               (spec: remote-service-discovery.md; HOST may be mapped to `url`)
    versions   GET <modules.v1>NAMESPACE/NAME/SYSTEM/versions
    download   GET <modules.v1>NAMESPACE/NAME/SYSTEM/VERSION/download
               -> 204 + X-Terraform-Get, or 200 {"location": ...}
               (module-registry-protocol.md)

The requests are the provider mirror's (gitreg/upstream/client.py): https
only, redirects included, hosts on refused addresses never contacted, a byte
cap on every body checked against Content-Length and while reading, truncated
bodies refused, connect/read timeouts and a total deadline,
JSON only when the answer says `application/json`, and every failure counted
in `gitreg_upstream_errors_total`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

from typing import BinaryIO
from urllib.parse import urljoin

from gitreg.errors import NotAVersion, UpstreamError
from gitreg.module_proxy.options import ProxyOptions
from gitreg.upstream.client import MAX_JSON_BYTES, HttpLimits, UpstreamHttp, json_object
from gitreg.versions import parse_version


class ModuleUpstream:
    def __init__(self, options: ProxyOptions, transport: httpx.AsyncBaseTransport | None = None):
        self.options = options
        # No per-host cap: the proxy fetches one module version at a time per
        # request, and the total deadline bounds each of them. Not pooled: the
        # service has no shutdown hook and is also driven from short-lived
        # event loops (asyncio.run), so each request closes its own client.
        limits = HttpLimits(
            options.connect_timeout,
            options.read_timeout,
            options.total_timeout,
            None,
            "module proxy",
            pooled=False,
        )
        self.http = UpstreamHttp(limits, transport)

    async def modules_base(self, host: str) -> str:
        """The `modules.v1` base URL of `host` (cached for an hour on success)."""
        return await self.http.discover(
            host, self.options.base_url(host), "modules.v1", "module registry"
        )

    async def versions(self, host: str, module: str) -> list[str]:
        """Every valid version the upstream lists for `module` (NS/NAME/SYSTEM)."""
        base = await self.modules_base(host)
        data, _ = await self.http.json(f"{base}{module}/versions", f"versions of {module}")
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
        answer = await self.http.get(url, what, MAX_JSON_BYTES, accept=(200, 204))
        location = answer.headers.get("x-terraform-get")
        if not location and answer.status == 200:
            location = json_object(url, what, answer.body).get("location")
        if not isinstance(location, str) or not location:
            raise UpstreamError(f"{what}: no X-Terraform-Get header or location")
        if location.startswith(("/", "./", "../")):
            # Relative to the download URL, as Terraform resolves it.
            location = urljoin(answer.url, location)
        return location

    async def download_to(self, url: str, out: BinaryIO, limit: int) -> None:
        """A plain archive named by a module's location, at most `limit` bytes."""
        await self.http.get(url, f"archive {url[:200]}", limit, sink=out)

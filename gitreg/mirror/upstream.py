"""The outbound side of the mirror: talking to upstream provider registries.

    discovery  GET https://HOST/.well-known/terraform.json -> providers.v1
               (spec: remote-service-discovery.md; HOST may be mapped elsewhere)
    versions   GET <providers.v1>NAMESPACE/TYPE/versions
    download   GET <providers.v1>NAMESPACE/TYPE/VERSION/download/OS/ARCH
    files      SHA256SUMS, its signature and the zip, from the URLs it names

The requests themselves (https only, refused addresses, caps, timeouts,
per-host concurrency, error mapping and metrics) are
gitreg/upstream/client.py's, shared with the module proxy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

import logging
import re
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

from gitreg.addresses import ProviderAddress, check_platform
from gitreg.errors import BadRequest, ConstraintError, UpstreamError
from gitreg.mirror.options import MirrorOptions
from gitreg.upstream.client import HttpLimits, Sink, UpstreamHttp, require_https
from gitreg.upstream.client import Progress as Progress
from gitreg.upstream.client import outbound_ssl_context as outbound_ssl_context
from gitreg.versions import parse_version

log = logging.getLogger("gitreg.mirror.upstream")

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_FILENAME = re.compile(r"^[A-Za-z0-9._+-]{1,255}$")


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


class UpstreamClient:
    def __init__(
        self,
        options: MirrorOptions,
        transport: httpx.AsyncBaseTransport | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.options = options
        limits = HttpLimits(
            options.connect_timeout,
            options.read_timeout,
            options.total_timeout,
            options.concurrency,
            "provider mirror",
        )
        self.http = UpstreamHttp(limits, transport, ssl_context)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def providers_base(self, hostname: str) -> str:
        """The `providers.v1` base URL of `hostname` (cached for an hour on success)."""
        return await self.http.discover(
            hostname, self.options.base_url(hostname), "providers.v1", "provider registry"
        )

    async def versions(self, address: ProviderAddress) -> list[UpstreamVersion]:
        base = await self.providers_base(address.hostname)
        url = f"{base}{address.namespace}/{address.type}/versions"
        data, _ = await self.http.json(url, f"versions of {address}")
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
        data, final = await self.http.json(url, f"download metadata of {what}")
        return _download_info(data, final, os_, arch, what)

    async def fetch_small(self, url: str, what: str, limit: int) -> bytes:
        return (await self.http.get(url, what, limit)).body

    async def fetch_to(
        self, url: str, what: str, limit: int, sink: Sink, progress: Progress | None = None
    ) -> httpx.Headers:
        return (await self.http.get(url, what, limit, sink, progress)).headers


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
        require_https(url)
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

"""Which namespaces gitreg proxies, read from `[[module_proxy]]` tables (docs/module-proxy.md).

    [[module_proxy]]
    host = "registry.terraform.io"          # the module's upstream hostname
    url = "https://registry.terraform.io"   # where discovery starts (default https://HOST)
    namespaces = ["terraform-aws-modules", "cloudposse"]   # or ["*"]

Only listed namespaces are proxied, so a request cannot make gitreg fetch from
any registry it names (as `mirror_allow` does for providers, SSRF). The
first table listing a namespace wins; `"*"` matches the rest. Timeouts, the
stale-if-error window and the size caps reuse the mirror's and own modules'
settings, so one set of limits covers everything gitreg fetches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gitreg.addresses import check_hostname
from gitreg.archives.build import ArchiveLimits
from gitreg.errors import BadRequest, ConfigError
from gitreg.settings import Settings


@dataclass(frozen=True)
class ProxyUpstream:
    host: str
    url: str  # https base URL, no trailing slash
    namespaces: tuple[str, ...]  # lower-cased; "*" for every namespace


@dataclass(frozen=True)
class ProxyOptions:
    upstreams: tuple[ProxyUpstream, ...]
    index_ttl: float
    stale_if_error: float
    connect_timeout: float
    read_timeout: float
    total_timeout: float
    git_timeout: float
    max_fetch_bytes: int
    archive: ArchiveLimits

    def upstream_for(self, namespace: str) -> ProxyUpstream | None:
        lowered = namespace.lower()
        for upstream in self.upstreams:
            if lowered in upstream.namespaces:
                return upstream
        for upstream in self.upstreams:
            if "*" in upstream.namespaces:
                return upstream
        return None

    def base_url(self, host: str) -> str:
        for upstream in self.upstreams:
            if upstream.host == host:
                return upstream.url
        return f"https://{host}"


def _upstream(entry: Any) -> ProxyUpstream:
    if not isinstance(entry, Mapping):
        raise ConfigError("[[module_proxy]] entries must be tables")
    try:
        host = check_hostname(str(entry.get("host", "")))
    except BadRequest as exc:
        raise ConfigError(f"[[module_proxy]] host: {exc}") from exc
    url = str(entry.get("url") or f"https://{host}").rstrip("/")
    if urlsplit(url).scheme != "https" or not urlsplit(url).hostname:
        raise ConfigError(f"[[module_proxy]] url {url!r} must be an https URL")
    namespaces = entry.get("namespaces")
    if not isinstance(namespaces, list) or not namespaces:
        raise ConfigError(f"[[module_proxy]] {host}: namespaces must be a non-empty list")
    return ProxyUpstream(host, url, tuple(str(n).lower() for n in namespaces))


def proxy_options(settings: Settings) -> ProxyOptions:
    raw = settings.extra.get("module_proxy", [])
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, list):
        raise ConfigError("module_proxy must be an array of tables ([[module_proxy]])")
    return ProxyOptions(
        upstreams=tuple(_upstream(e) for e in raw),
        index_ttl=settings.mirror_index_ttl,
        stale_if_error=settings.mirror_stale_if_error,
        connect_timeout=settings.mirror_connect_timeout,
        read_timeout=settings.mirror_read_timeout,
        total_timeout=settings.mirror_total_timeout,
        git_timeout=settings.git_timeout,
        max_fetch_bytes=settings.max_fetch_bytes,
        archive=ArchiveLimits(
            max_total_bytes=settings.max_archive_bytes,
            max_files=settings.max_archive_files,
            max_file_bytes=settings.max_file_bytes,
        ),
    )

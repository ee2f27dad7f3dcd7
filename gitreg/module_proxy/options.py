"""The module proxy's options, gathered once from `Settings`. Timeouts, the
stale-if-error window and the size caps reuse the mirror's and own modules'
settings, so one set of limits covers everything gitreg fetches."""

from __future__ import annotations

from dataclasses import dataclass

from gitreg.archives.build import ArchiveLimits
from gitreg.module_proxy.config import ProxyUpstream
from gitreg.settings import Settings


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


def proxy_options(settings: Settings) -> ProxyOptions:
    return ProxyOptions(
        upstreams=settings.module_proxy,
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

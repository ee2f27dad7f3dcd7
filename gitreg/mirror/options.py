"""The mirror's settings, parsed once from `Settings` (docs/mirror.md, Configuration)."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from gitreg.addresses import ProviderAddress, check_hostname, check_platform
from gitreg.errors import BadRequest, ConfigError
from gitreg.mirror.upstreams import upstream_url
from gitreg.settings import Settings


@dataclass(frozen=True)
class MirrorOptions:
    upstreams: Mapping[str, str]  # provider hostname -> https base URL (no trailing /)
    allow: tuple[str, ...]  # HOST/NAMESPACE/TYPE globs
    platforms: tuple[str, ...]
    local_hostnames: frozenset[str]  # gitreg's own providers appear under these
    index_ttl: float
    stale_if_error: float
    connect_timeout: float
    read_timeout: float
    total_timeout: float
    concurrency: int
    max_package_bytes: int
    max_unpacked_bytes: int
    max_files: int

    def allowed(self, address: ProviderAddress) -> bool:
        """Only listed hostnames/namespaces are pulled through, so a request cannot
        make gitreg fetch from any host it names (SSRF). Mapped hosts are allowed."""
        if address.hostname in self.upstreams:
            return True
        return any(fnmatch.fnmatchcase(address.key, pattern) for pattern in self.allow)

    def base_url(self, hostname: str) -> str:
        """Where discovery for `hostname` starts: its mapping, else https://HOSTNAME."""
        return self.upstreams.get(hostname, f"https://{hostname}")


def _split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_upstream(entry: str) -> tuple[str, str]:
    """`HOSTNAME=https://BASE` as given to `--upstream`."""
    hostname, sep, url = entry.partition("=")
    if not sep:
        raise BadRequest(f"upstream {entry[:120]!r} must be HOSTNAME=BASE_URL")
    return upstream_url(hostname.strip(), url.strip())


def mirror_options(settings: Settings) -> MirrorOptions:
    try:
        upstreams = dict(settings.upstreams)
        for entry in _split(settings.upstream):
            host, base = parse_upstream(entry)
            upstreams[host] = base
        wanted = _split(settings.mirror_platforms)
        platforms = tuple(dict.fromkeys(check_platform(p) for p in wanted))
        local = {check_hostname(h) for h in _split(settings.mirror_hostnames)}
    except BadRequest as exc:
        raise ConfigError(str(exc)) from exc
    if settings.public_url:
        netloc = urlsplit(settings.public_url).netloc.lower()
        local.add(netloc.removesuffix(":443"))
    return MirrorOptions(
        upstreams=upstreams,
        allow=tuple(p.lower() for p in _split(settings.mirror_allow)),
        platforms=platforms,
        local_hostnames=frozenset(local),
        index_ttl=settings.mirror_index_ttl,
        stale_if_error=settings.mirror_stale_if_error,
        connect_timeout=settings.mirror_connect_timeout,
        read_timeout=settings.mirror_read_timeout,
        total_timeout=settings.mirror_total_timeout,
        concurrency=settings.mirror_concurrency,
        max_package_bytes=settings.max_provider_package_bytes,
        max_unpacked_bytes=settings.max_provider_unpacked_bytes,
        max_files=settings.max_provider_files,
    )

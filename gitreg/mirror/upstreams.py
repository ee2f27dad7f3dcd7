"""Where the mirror fetches a provider hostname from: the `[upstreams]` table of
the config file, parsed once as `Settings.upstreams`, and `--upstream
HOSTNAME=URL` entries (docs/mirror.md, Configuration).

    [upstreams]
    "registry.terraform.io" = "https://artifactory.example/terraform"
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from gitreg.addresses import check_hostname
from gitreg.errors import BadRequest, ConfigError
from gitreg.setting_names import KeyCheck, refuse_unknown_keys


def upstream_url(hostname: str, url: str) -> tuple[str, str]:
    """(hostname, https base URL without a trailing /); BadRequest if either is bad."""
    host = check_hostname(hostname)
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise BadRequest(f"upstream for {host} must be an https:// URL, got {url[:120]!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise BadRequest(f"upstream for {host} must be a plain base URL, got {url[:120]!r}")
    return host, url.rstrip("/")


def parse_upstreams(raw: object, keys: KeyCheck = refuse_unknown_keys) -> dict[str, str]:
    """`[upstreams]`: provider hostname -> base URL. Any hostname is a key, so
    `keys` has nothing to check."""
    table = {} if raw is None else raw
    if not isinstance(table, Mapping):
        raise ConfigError('[upstreams] must be a table of HOSTNAME = "https://..."')
    upstreams = {}
    try:
        for hostname, url in table.items():
            if not isinstance(url, str):
                raise BadRequest(f"upstream for {hostname!r} must be an https:// URL")
            host, base = upstream_url(str(hostname), url)
            upstreams[host] = base
    except BadRequest as exc:
        raise ConfigError(f"[upstreams] {exc}") from exc
    return upstreams

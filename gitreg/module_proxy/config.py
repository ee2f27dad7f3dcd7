"""Which namespaces gitreg proxies: the `[[module_proxy]]` tables of the config
file, parsed once as `Settings.module_proxy` (docs/module-proxy.md).

    [[module_proxy]]
    host = "registry.terraform.io"          # the module's upstream hostname
    url = "https://registry.terraform.io"   # where discovery starts (default https://HOST)
    namespaces = ["terraform-aws-modules", "cloudposse"]   # or ["*"]

Only listed namespaces are proxied, so a request cannot make gitreg fetch from
any registry it names (as `mirror_allow` does for providers, SSRF). The
first table listing a namespace wins; `"*"` matches the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from gitreg.addresses import check_hostname
from gitreg.errors import BadRequest, ConfigError
from gitreg.setting_names import KeyCheck, refuse_unknown_keys

MODULE_PROXY_KEYS = frozenset({"host", "url", "namespaces"})


@dataclass(frozen=True)
class ProxyUpstream:
    host: str
    url: str  # https base URL, no trailing slash
    namespaces: tuple[str, ...]  # lower-cased; "*" for every namespace


def _upstream(entry: object, keys: KeyCheck) -> ProxyUpstream:
    if not isinstance(entry, Mapping):
        raise ConfigError("[[module_proxy]] entries must be tables")
    keys("module_proxy", entry, MODULE_PROXY_KEYS)
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


def parse_module_proxy(
    raw: object, keys: KeyCheck = refuse_unknown_keys
) -> tuple[ProxyUpstream, ...]:
    """The tables in order; `[module_proxy]` alone is one table."""
    entries = [] if raw is None else [raw] if isinstance(raw, Mapping) else raw
    if not isinstance(entries, list):
        raise ConfigError("module_proxy must be an array of tables ([[module_proxy]])")
    return tuple(_upstream(entry, keys) for entry in entries)

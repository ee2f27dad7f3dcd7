"""The `[forges.NAME]` tables of the config file, parsed once as `Settings.forges`
(docs/providers.md, Forges).

`github` (github.com) and `gitlab` (gitlab.com) exist by default; a table of
the same name replaces them, so GitHub Enterprise and self-hosted GitLab only
need another `api_url`. A token stays as written (literal, `env:NAME` or
`file:/path`) and is read when a forge is first asked (gitreg/providers/forges.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gitreg.errors import ConfigError
from gitreg.setting_names import KeyCheck, refuse_unknown_keys

KINDS = ("github", "gitlab")
FORGE_KEYS = frozenset({"kind", "api_url", "token", "ca_file", "hosts", "allow_http"})
DEFAULT_FORGES: Mapping[str, Mapping[str, Any]] = {
    "github": {"kind": "github", "api_url": "https://api.github.com", "hosts": ["github.com"]},
    "gitlab": {"kind": "gitlab", "api_url": "https://gitlab.com/api/v4", "hosts": ["gitlab.com"]},
}


@dataclass(frozen=True)
class ForgeConfig:
    name: str
    kind: str
    api_url: str
    token: str  # as configured; `forge_config` hands it out read
    ca_file: Path | None
    hosts: tuple[str, ...]
    allow_http: bool | None  # None: as `allow_http_remotes`

    def __repr__(self) -> str:  # never the token: tokens stay out of logs
        return f"ForgeConfig(name={self.name!r}, kind={self.kind!r}, api_url={self.api_url!r})"

    def check_scheme(self, allow_http_remotes: bool) -> None:
        """ConfigError unless `api_url` is https, or http where plain http is allowed."""
        allow_http = allow_http_remotes if self.allow_http is None else self.allow_http
        scheme = urlsplit(self.api_url).scheme
        if scheme != "https" and not (scheme == "http" and allow_http):
            raise ConfigError(
                f"[forges.{self.name}] api_url must be an https URL, got {self.api_url!r}",
                user_input=True,
            )


def _forge(name: str, raw: Mapping[str, Any]) -> ForgeConfig:
    kind = str(raw.get("kind", name))
    if kind not in KINDS:
        raise ConfigError(f"[forges.{name}] kind must be one of {', '.join(KINDS)}")
    api_url = str(raw.get("api_url", DEFAULT_FORGES[kind]["api_url"])).rstrip("/")
    allow_http = raw.get("allow_http")
    if allow_http is not None and not isinstance(allow_http, bool):
        raise ConfigError(f"[forges.{name}] allow_http must be true or false")
    hosts = raw.get("hosts", [])
    if not isinstance(hosts, list):
        raise ConfigError(f"[forges.{name}] hosts must be a list of host names")
    ca = raw.get("ca_file")
    return ForgeConfig(
        name=name,
        kind=kind,
        api_url=api_url,
        token=str(raw.get("token", "")),
        ca_file=Path(str(ca)).expanduser() if ca else None,
        hosts=tuple(str(h).lower() for h in hosts),
        allow_http=allow_http,
    )


def parse_forges(raw: object, keys: KeyCheck = refuse_unknown_keys) -> dict[str, ForgeConfig]:
    """The default forges, each replaced by a table of its name, and the other tables."""
    configured = {} if raw is None else raw
    if not isinstance(configured, Mapping):
        raise ConfigError("[forges] must be a table of tables: [forges.NAME]")
    forges = {}
    for name, entry in {**DEFAULT_FORGES, **configured}.items():
        if not isinstance(entry, Mapping):
            raise ConfigError(f"[forges.{name}] must be a table")
        keys(f"forges.{name}", entry, FORGE_KEYS)
        forges[str(name)] = _forge(str(name), entry)
    return forges

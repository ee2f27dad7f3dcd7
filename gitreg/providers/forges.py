"""Reading releases and their assets from GitHub and GitLab, with httpx.

Forges are configured in the config file, one `[forges.NAME]` table each
(docs/providers.md, Forges), parsed once as `Settings.forges`
(gitreg/providers/forge_config.py):

    [forges.ghe]
    kind = "github"
    api_url = "https://ghe.example.com/api/v3"
    token = "env:GHE_TOKEN"          # or "file:/path", or the literal token
    ca_file = "/etc/ssl/corp-ca.pem" # optional: a private CA for this forge
    hosts = ["ghe.example.com"]      # git URL hosts that default to this forge

API shapes (GitHub REST "Releases" and "Release assets"; GitLab "Releases API"
and "Release links API"):
- GitHub: `GET /repos/OWNER/REPO/releases/tags/TAG` and `GET .../releases`
  give `{tag_name, draft, created_at, assets: [{id, name, size, state}]}`; an
  asset's bytes are `GET /repos/OWNER/REPO/releases/assets/ID` with `Accept:
  application/octet-stream`, usually a 302 to a storage host.
- GitLab: `GET /projects/ID/releases/TAG` and `GET .../releases` give
  `{tag_name, created_at, upcoming_release, assets: {links: [{name, url,
  direct_asset_url}]}}`; links may point anywhere.

The token goes only to the configured API's origin: redirects are followed by
hand, dropping credentials on any other origin, refusing plain http (unless
the forge allows it) and link-local targets. Every read has a timeout and a
byte cap (the same rules as for upstream registries).
"""

from __future__ import annotations

import io
import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol
from urllib.parse import quote, urljoin, urlsplit

from gitreg import __version__
from gitreg.errors import ConfigError, ForgeError, NotFound
from gitreg.numbers import declared_length
from gitreg.providers.forge_config import ForgeConfig
from gitreg.secret_refs import resolve_secret
from gitreg.settings import Settings
from gitreg.upstream.hosts import refused_address

if TYPE_CHECKING:
    # imported where a forge is first asked: httpx is memory a serving worker
    # need not carry (docs/performance.md)
    import httpx

MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_REDIRECTS = 5
RELEASES_PAGE = 30


def forge_config(settings: Settings, name: str) -> ForgeConfig:
    """The forge `name` as configured, with its token read now (`env:`/`file:`
    references) and `allow_http` decided."""
    config = settings.forges.get(name)
    if config is None:
        known = ", ".join(sorted(settings.forges))
        raise NotFound(f"no forge named {name!r} is configured (known: {known})")
    allow_http = settings.allow_http_remotes if config.allow_http is None else config.allow_http
    return replace(config, token=resolve_secret(config.token), allow_http=allow_http)


def default_forge(settings: Settings, git_url: str) -> str:
    """The forge whose `hosts` include the git URL's host, or ""."""
    text = git_url.strip()
    host = urlsplit(text).hostname or ""
    if not host and "@" in text.split(":", 1)[0]:
        host = text.split("@", 1)[1].split(":", 1)[0]  # scp-like git@host:owner/repo
    for name, config in settings.forges.items():
        if host and host.lower() in config.hosts:
            return name
    return ""


@dataclass(frozen=True)
class Asset:
    name: str
    size: int
    url: str
    ready: bool  # GitHub marks an asset still being uploaded as state "new"


@dataclass(frozen=True)
class Release:
    tag: str
    draft: bool
    created_at: str
    assets: tuple[Asset, ...]


class ReleaseSource(Protocol):
    """What ingestion needs from a forge."""

    def release(self, tag: str) -> Release | None: ...

    def releases(self) -> list[Release]: ...

    def download(self, asset: Asset, out: BinaryIO, max_bytes: int) -> int: ...

    def close(self) -> None: ...


class _HTTP:
    """httpx with the forge's CA, timeouts, byte caps and origin-bound credentials."""

    def __init__(
        self, config: ForgeConfig, timeout: float, transport: httpx.BaseTransport | None
    ) -> None:
        import httpx

        self.config = config
        verify: ssl.SSLContext | bool = True
        if config.ca_file is not None:
            try:
                verify = ssl.create_default_context(cafile=str(config.ca_file))
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"[forges.{config.name}] ca_file: {exc}") from exc
        self._client = httpx.Client(
            transport=transport,
            verify=verify,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            follow_redirects=False,
            headers={"User-Agent": f"gitreg/{__version__}"},
        )
        self._origin = _origin(config.api_url)

    def close(self) -> None:
        self._client.close()

    def _check_target(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "https" and not (parts.scheme == "http" and self.config.allow_http):
            raise ForgeError(f"{self.config.name}: refusing to fetch {parts.scheme}:// URL {url!r}")
        address = refused_address(parts.hostname or "")
        if address is not None:
            raise ForgeError(f"{self.config.name}: refusing to fetch from {address}")

    def _headers(self, url: str, accept: str) -> dict[str, str]:
        headers = {"Accept": accept}
        if self.config.token and _origin(url) == self._origin:
            headers["Authorization"] = f"Bearer {self.config.token}"
        if self.config.kind == "github":
            headers["X-GitHub-Api-Version"] = "2022-11-28"
        return headers

    def stream(self, url: str, accept: str, out: BinaryIO, max_bytes: int) -> int | None:
        """Copy the body at `url` (after redirects) into `out`; None on 404."""
        import httpx

        for _ in range(MAX_REDIRECTS + 1):
            self._check_target(url)
            try:
                with self._client.stream("GET", url, headers=self._headers(url, accept)) as answer:
                    if answer.is_redirect and "location" in answer.headers:
                        url = urljoin(url, answer.headers["location"])
                        continue
                    if answer.status_code == 404:
                        return None
                    if answer.status_code != 200:
                        raise ForgeError(
                            f"{self.config.name}: {answer.status_code} from {_safe(url)}"
                        )
                    declared = declared_length(answer.headers.get("content-length", ""))
                    if declared is not None and declared > max_bytes:
                        raise ForgeError(f"{_safe(url)} is over the {max_bytes}-byte limit")
                    size = 0
                    for chunk in answer.iter_bytes(1024 * 1024):
                        size += len(chunk)
                        if size > max_bytes:
                            raise ForgeError(f"{_safe(url)} is over the {max_bytes}-byte limit")
                        out.write(chunk)
                    return size
            except httpx.HTTPError as exc:
                raise ForgeError(f"{self.config.name}: cannot fetch {_safe(url)}: {exc}") from exc
        raise ForgeError(f"{self.config.name}: too many redirects from {_safe(url)}")

    def get_json(self, url: str) -> Any | None:
        buffer = io.BytesIO()
        accept = (
            "application/vnd.github+json" if self.config.kind == "github" else "application/json"
        )
        if self.stream(url, accept, buffer, MAX_JSON_BYTES) is None:
            return None
        try:
            return json.loads(buffer.getvalue())
        except ValueError as exc:
            raise ForgeError(f"{self.config.name}: {_safe(url)} did not answer JSON") from exc


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def _safe(url: str) -> str:
    """A URL for messages: no query string (signed storage URLs carry credentials)."""
    return url.split("?", 1)[0][:300]


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


class _ForgeReleases:
    """What both forges share: listing the newest releases and streaming an asset.
    Subclasses set `_http` and `_base` and read one release (`_release`)."""

    _http: _HTTP
    _base: str

    def _release(self, data: Any) -> Release | None:
        raise NotImplementedError

    def close(self) -> None:
        self._http.close()

    def releases(self) -> list[Release]:
        data = self._http.get_json(f"{self._base}/releases?per_page={RELEASES_PAGE}")
        if not isinstance(data, list):
            return []
        return [r for r in map(self._release, data) if r is not None]

    def download(self, asset: Asset, out: BinaryIO, max_bytes: int) -> int:
        size = self._http.stream(asset.url, "application/octet-stream", out, max_bytes)
        if size is None:
            raise ForgeError(f"release asset {asset.name} is not at {_safe(asset.url)}")
        return size


class GitHubReleases(_ForgeReleases):
    def __init__(self, http: _HTTP, forge_repo: str) -> None:
        parts = forge_repo.split("/")
        if len(parts) != 2 or not all(parts):
            raise ConfigError(f"GitHub repository must be OWNER/REPO, got {forge_repo!r}")
        self._http = http
        self._base = f"{http.config.api_url}/repos/{quote(parts[0])}/{quote(parts[1])}"

    def _release(self, data: Any) -> Release | None:
        if not isinstance(data, dict) or not _text(data, "tag_name"):
            return None
        assets = []
        for item in data.get("assets") or []:
            if isinstance(item, dict) and isinstance(item.get("id"), int) and _text(item, "name"):
                assets.append(
                    Asset(
                        name=_text(item, "name"),
                        size=int(item.get("size") or 0),
                        # Built from the configured API, never taken from the answer.
                        url=f"{self._base}/releases/assets/{item['id']}",
                        ready=item.get("state", "uploaded") == "uploaded",
                    )
                )
        return Release(
            tag=_text(data, "tag_name"),
            draft=bool(data.get("draft")),
            created_at=_text(data, "created_at"),
            assets=tuple(assets),
        )

    def release(self, tag: str) -> Release | None:
        return self._release(self._http.get_json(f"{self._base}/releases/tags/{quote(tag, '')}"))


class GitLabReleases(_ForgeReleases):
    def __init__(self, http: _HTTP, forge_repo: str) -> None:
        if not forge_repo.strip("/") or ".." in forge_repo.split("/"):
            raise ConfigError(f"GitLab project must be GROUP/PROJECT, got {forge_repo!r}")
        self._http = http
        self._base = f"{http.config.api_url}/projects/{quote(forge_repo.strip('/'), safe='')}"

    def _release(self, data: Any) -> Release | None:
        if not isinstance(data, dict) or not _text(data, "tag_name"):
            return None
        links = (data.get("assets") or {}).get("links") or []
        assets = []
        for link in links:
            if not isinstance(link, dict):
                continue
            url = _text(link, "direct_asset_url") or _text(link, "url")
            if _text(link, "name") and url:
                assets.append(Asset(_text(link, "name"), 0, url, True))
        return Release(
            tag=_text(data, "tag_name"),
            # An "upcoming" release is GitLab's nearest thing to a draft.
            draft=bool(data.get("upcoming_release")),
            created_at=_text(data, "created_at"),
            assets=tuple(assets),
        )

    def release(self, tag: str) -> Release | None:
        return self._release(self._http.get_json(f"{self._base}/releases/{quote(tag, '')}"))


def release_source(
    settings: Settings,
    forge: str,
    forge_repo: str,
    transport: httpx.BaseTransport | None = None,
) -> ReleaseSource:
    config = forge_config(settings, forge)
    http = _HTTP(config, settings.forge_timeout, transport)
    if config.kind == "github":
        return GitHubReleases(http, forge_repo)
    return GitLabReleases(http, forge_repo)

"""Which git remotes gitreg may fetch from.

Remotes are configured by the operator, never taken from a webhook payload.
Even so, transports that run commands (`ext::`), plain-text `git://`,
and hosts on link-local addresses (cloud metadata services) are refused.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from gitreg.errors import BadRequest
from gitreg.upstream.hosts import refused_address

_SCP_LIKE = re.compile(r"^(?P<user>[A-Za-z0-9._-]+@)?(?P<host>[A-Za-z0-9.-]+):(?P<path>[^/].*)$")


def _check_host(host: str, url: str, user: str | None = None) -> None:
    if not host:
        raise BadRequest(f"remote {url!r} has no host")
    # ssh is run with `[user@]host` as an argument: a leading '-' would be an option.
    if host.startswith("-") or (user or "").startswith("-"):
        raise BadRequest(f"remote {url!r} has a host or user name starting with '-'")
    address = refused_address(host)
    if address is not None:
        raise BadRequest(f"remote {url!r} points at a refused address ({address})")


def normalise_remote(url: str, *, allow_local: bool, allow_http: bool) -> str:
    """Return the remote as gitreg stores it, or raise BadRequest explaining why not.

    Local paths become absolute `file://`-free paths so the same repository is
    not registered twice under two spellings.
    """
    text = url.strip()
    if not text or "\x00" in text or "\n" in text:
        raise BadRequest("remote URL is empty or contains control characters")
    if text.startswith("-"):
        raise BadRequest(f"remote {text!r} starts with '-'")
    if "::" in text.split("/", 1)[0]:
        raise BadRequest(f"remote helper transports such as {text.split('::')[0]}:: are refused")
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # e.g. an unbalanced `[` ("Invalid IPv6 URL")
        raise BadRequest(f"remote {text!r} is not a valid URL: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme in ("https", "ssh", "git+ssh", "ssh+git"):
        _check_host(parts.hostname or "", text, parts.username)
        return text
    if scheme == "http":
        if not allow_http:
            raise BadRequest(f"plain http remote {text!r} refused (set allow_http_remotes)")
        _check_host(parts.hostname or "", text, parts.username)
        return text
    if scheme == "file" or (not scheme and (text.startswith(("/", ".", "~")))):
        if not allow_local:
            raise BadRequest(f"local remote {text!r} refused (allow_local_remotes is off)")
        path = Path(parts.path if scheme == "file" else text).expanduser().resolve()
        return str(path)
    scp = _SCP_LIKE.match(text)
    if scp and not scheme:
        _check_host(scp.group("host"), text)
        return text
    if not scheme and not allow_local:
        raise BadRequest(f"remote {text!r} is not a URL")
    if not scheme:
        return str(Path(text).resolve())
    raise BadRequest(f"remote scheme {scheme!r} is not supported (use https, ssh or a local path)")


def forge_name_from_url(url: str) -> str:
    """`OWNER/REPO` from the last two path parts of a git URL (for webhooks)."""
    text = url.strip().rstrip("/")
    scp = _SCP_LIKE.match(text)
    path = scp.group("path") if scp and "://" not in text else urlsplit(text).path
    if path.endswith(".git"):
        path = path[: -len(".git")]
    parts = [p for p in path.split("/") if p]
    return "/".join(parts[-2:])

"""What an upstream registry's `X-Terraform-Get` names, in go-getter's syntax.

Terraform hands the download location to go-getter (spec:
module-registry-protocol.md, "Download Source Code for a Specific Module
Version"; TERRAFORM-CLIENT.md). The proxy accepts only what it can fetch
safely and reproducibly over TLS:

    git::https://HOST/PATH[//SUBDIR][?ref=REF]      the usual public-registry answer
    https://HOST/PATH.git[//SUBDIR][?ref=REF]       git forced by the .git suffix
    github.com/OWNER/REPO[//SUBDIR][?ref=REF]       go-getter's GitHub shorthand

    https://HOST/PATH.tar.gz[//SUBDIR]              a plain archive (also .tgz, .zip, ...)
    https://HOST/PATH?archive=zip[//SUBDIR]         go-getter's archive parameter

Everything else is refused with a message naming the form: other getters
(`s3::`, `gcs::`, `hg::`, ...), `file://` and local paths, ssh and plain http,
`sshkey`, and hosts on refused addresses (link-local, e.g. cloud metadata:
gitreg.upstream.hosts, as for git remotes). A plain archive is unpacked
into a git tree and archived again by gitreg's own builder (archive_source.py),
so it passes the same rules as gitreg's own modules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from gitreg.errors import UpstreamError
from gitreg.upstream.hosts import refused_address

_FORCED = re.compile(r"^([A-Za-z0-9]+)::(.*)$", re.DOTALL)
_GITHUB = re.compile(r"^github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(\.git)?(//.*|)$")
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/+-]{0,199}$")
_ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar")


@dataclass(frozen=True)
class ArchiveSource:
    url: str  # https URL of the archive, `//subdir` removed
    kind: str  # "tar.gz", "tgz", "zip", ... as go-getter names it
    subdir: str


@dataclass(frozen=True)
class GitSource:
    url: str  # https URL of the repository, query removed
    ref: str  # tag, branch or commit; "" means the remote's HEAD
    subdir: str  # "" or a relative path inside the repository


def _refuse(location: str, why: str) -> UpstreamError:
    return UpstreamError(f"module source {location[:200]!r} refused: {why}")


def parse_source(location: str) -> GitSource | ArchiveSource:
    """The git repository (ref, subdirectory) or archive `location` names, or UpstreamError."""
    text = location.strip()
    if not text or any(ord(c) < 32 for c in text):
        raise _refuse(location, "empty or contains control characters")
    forced = _FORCED.match(text)
    if forced:
        getter, text = forced.group(1).lower(), forced.group(2)
        if getter != "git":
            raise _refuse(
                location,
                f"the {getter}:: getter is not supported; only git over https is proxied",
            )
    else:
        github = _GITHUB.match(text.split("?", 1)[0])
        if github:
            query = "?" + text.split("?", 1)[1] if "?" in text else ""
            text = f"https://github.com/{github[1]}/{github[2]}.git{github[4]}{query}"
        elif not urlsplit(text).path.split("//")[0].endswith(".git"):
            return _archive_source(location, text)
    return _git_source(location, text)


def _archive_source(location: str, text: str) -> ArchiveSource:
    parts = _checked_https(location, text)
    path, _, subdir = parts.path.partition("//")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    kind = query.pop("archive", "")
    if not kind:
        kind = next((k.lstrip(".") for k in _ARCHIVE_SUFFIXES if path.endswith(k)), "")
    if not kind:
        raise _refuse(location, "not a git repository or a known archive (local paths are refused)")
    if kind not in {k.lstrip(".") for k in _ARCHIVE_SUFFIXES}:
        raise _refuse(location, f"archive type {kind!r} is not supported")
    rest = urlencode(query)
    url = urlunsplit(("https", parts.netloc, path, rest, ""))
    return ArchiveSource(url=url, kind=kind, subdir=_subdir(location, subdir))


def _checked_https(location: str, text: str) -> Any:
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        raise _refuse(location, f"not a valid URL: {exc}") from exc
    if parts.scheme.lower() in ("", "file"):
        raise _refuse(location, "local paths and file:// are refused; only https is fetched")
    if parts.scheme.lower() != "https":
        raise _refuse(location, f"scheme {parts.scheme!r}: only https is fetched")
    if not parts.hostname or parts.username or parts.password:
        raise _refuse(location, "needs a host and no credentials in the URL")
    address = refused_address(parts.hostname)
    if address is not None:
        raise _refuse(location, f"host is on a refused address ({address})")
    return parts


def _subdir(location: str, subdir: str) -> str:
    subdir = subdir.strip("/")
    if subdir and any(p in ("", ".", "..") or "*" in p for p in subdir.split("/")):
        raise _refuse(location, "subdirectory must be a plain relative path")
    return subdir


def _git_source(location: str, text: str) -> GitSource:
    parts = _checked_https(location, text)
    path, _, raw_subdir = parts.path.partition("//")
    subdir = _subdir(location, raw_subdir)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    if "sshkey" in query:
        raise _refuse(location, "sshkey: only anonymous https fetches are proxied")
    ref = query.pop("ref", "")
    query.pop("depth", None)  # the proxy always fetches at depth 1
    if query:
        raise _refuse(location, f"unsupported parameters {sorted(query)}")
    if ref and (not _REF.match(ref) or ".." in ref):
        raise _refuse(location, "ref is not a plain tag, branch or commit name")
    url = urlunsplit(("https", parts.netloc, path, urlencode({}), ""))
    return GitSource(url=url, ref=ref, subdir=subdir)

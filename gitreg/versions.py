"""Tags to versions.

A tag becomes a version when, after the module's tag prefix, it is `X.Y.Z` or
`vX.Y.Z` with optional semver prerelease/build parts. Everything else is
ignored with a reason the operator can read (`gitreg modules --verbose`).
Hostile ref names (checklist G1) never get as far as a git command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import semver

# Refs we refuse outright, before looking for a version (checklist G1).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_TAG_LENGTH = 255


@dataclass(frozen=True, order=True)
class TagVersion:
    """A version read from a tag. `key` is the version without build metadata:
    semver gives build metadata no precedence, so `1.0.0+a` and `1.0.0+b` are one
    version and the second is a conflict."""

    key: str
    version: str
    tag: str


class NotAVersion(ValueError):
    """The tag does not name a version; the message says why."""


def unsafe_ref_reason(tag: str) -> str | None:
    """Why a tag name is refused before any other processing, or None."""
    if not tag:
        return "empty tag name"
    if len(tag) > MAX_TAG_LENGTH:
        return f"tag name longer than {MAX_TAG_LENGTH} characters"
    if _CONTROL.search(tag):
        return "control character in tag name"
    if ".." in tag:
        return "'..' in tag name"
    if tag.startswith("-"):
        return "tag name starts with '-'"
    return None


def parse_version(text: str) -> semver.Version:
    """Strict semver, with one optional leading `v`."""
    body = text[1:] if text[:1] in ("v", "V") else text
    try:
        return semver.Version.parse(body)
    except (ValueError, TypeError) as exc:
        raise NotAVersion(f"{text!r} is not a semantic version (X.Y.Z)") from exc


def version_from_tag(tag: str, prefix: str = "") -> TagVersion:
    """Map a tag (without `refs/tags/`) to a version, or raise NotAVersion."""
    reason = unsafe_ref_reason(tag)
    if reason:
        raise NotAVersion(reason)
    if prefix and not tag.startswith(prefix):
        raise NotAVersion(f"does not start with the module's tag prefix {prefix!r}")
    parsed = parse_version(tag[len(prefix) :])
    key = str(parsed.replace(build=None))
    return TagVersion(key=key, version=str(parsed), tag=tag)


def sort_key(version: str) -> semver.Version:
    return semver.Version.parse(version)

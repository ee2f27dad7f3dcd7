"""Repository names and tags: how OCI names gitreg's releases.

A module `NS/NAME/SYSTEM` is the repository `<module prefix>/ns/name/system`;
a hosted provider `NS/TYPE` is `<provider prefix>/ns/type`, and a mirrored one
also `<provider prefix>/hostname/ns/type`. OCI names are lower case; gitreg's
addresses compare without regard to case, so the lower-cased name is the only
spelling. A tag is a version with `+` written as `_` (OCI tags have no `+`),
the convention OpenTofu's `oci_mirror` reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gitreg.errors import BadRequest, NotAVersion
from gitreg.versions import Version, parse_tag_version

# distribution-spec v1.1, "Pulling manifests": <name> and <reference>.
NAME_RE = re.compile(
    r"^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$"
)
TAG_RE = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
MAX_NAME = 255


class NameInvalid(BadRequest):
    """A repository name outside the spec's grammar (`NAME_INVALID`)."""


@dataclass(frozen=True)
class RepoName:
    """A repository name split into what it names. `kind` is "module" or
    "provider"; `parts` are the address parts after the prefix, lower-cased:
    (ns, name, system) for a module, (ns, type) or (hostname, ns, type) for a
    provider. `namespace` is the one whose read rules apply."""

    name: str
    kind: str
    parts: tuple[str, ...]

    @property
    def namespace(self) -> str:
        return self.parts[-2] if self.kind == "provider" else self.parts[0]


def _prefix_parts(prefix: str) -> tuple[str, ...]:
    return tuple(p for p in prefix.strip("/").split("/") if p)


def parse_name(name: str, module_prefix: str, provider_prefix: str) -> RepoName | None:
    """What `name` names, or None when it is no repository gitreg could serve
    (malformed, or outside both prefixes)."""
    if len(name) > MAX_NAME or not NAME_RE.fullmatch(name):
        return None
    parts = tuple(name.split("/"))
    for kind, prefix, sizes in (
        ("module", module_prefix, (3,)),
        ("provider", provider_prefix, (2, 3)),
    ):
        head = _prefix_parts(prefix)
        rest = parts[len(head) :]
        if parts[: len(head)] == head and len(rest) in sizes:
            return RepoName(name, kind, rest)
    return None


def tag_of(version: str) -> str:
    return version.replace("+", "_")


def version_of(tag: str) -> Version | None:
    """The version a tag names, None when it names none."""
    try:
        return parse_tag_version(tag.replace("_", "+"))
    except NotAVersion:
        return None


def is_digest(reference: str) -> bool:
    return reference.startswith("sha256:")

"""Versions and version constraints, for modules, providers and the mirror.

Versions are semantic versions (semver 2.0). A tag becomes a module or provider
version when, after the module's tag prefix, it is `X.Y.Z` or `vX.Y.Z` with
optional semver prerelease/build parts. Everything else is ignored with a reason
the operator can read (`gitreg modules --verbose`). Hostile ref names never get
as far as a git command. What gitreg passes on to Terraform is strict semver
without `v`: the client fails a whole version list on one bad entry
(TERRAFORM-CLIENT.md, Providers).

Provider version constraints are resolved exactly as Terraform resolves them.

Terraform (v0.13 to v1.x) checks a `version` argument twice: hashicorp/go-version
validates each comma-separated piece, then the string is parsed again by
apparentlymart/go-versions' "Ruby-style" parser, which decides what it means
(spec: provider-requirements.md, "Version Constraints"). A string must pass both.

Meaning of one piece, with missing parts of the version filled with zeros:

    1.2.3, = 1.2.3   exactly that version (build metadata included)
    != 1.2.3         anything but that version
    > >= < <=        comparisons by semver precedence
    ~> 1.2.3         >= 1.2.3, < 1.3.0 (three parts given: only the patch may grow)
    ~> 1.2, ~> 1     >= 1.2.0, < 2.0.0 (fewer parts: the minor may grow)

Pieces joined by commas must all hold. Prereleases (`2.0.0-beta1`) are selected
only when an exact piece names them (`= 2.0.0-beta1`) and every other piece
allows them; `>=`, `~>` and an empty constraint never select a prerelease. The
newest allowed version wins, except that a version recorded in
`.terraform.lock.hcl` that still meets the constraints is kept.

This module stays at the top level on purpose, beside `gitreg.addresses`: it is
the shared vocabulary of `gitreg.modules`, `gitreg.providers` and `gitreg.mirror`,
so none of those packages owns it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import total_ordering
from typing import TypeVar

from gitreg.errors import ConstraintError, NotAVersion

# Refs we refuse outright, before looking for a version.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_TAG_LENGTH = 255
MAX_VERSION_LENGTH = 256
MAX_CONSTRAINT_LENGTH = 1024
_MAX_NUMBER = 2**63
_T = TypeVar("_T")


@total_ordering
@dataclass(frozen=True)
class Version:
    """A semantic version. Ordering is semver precedence (build metadata ignored);
    equality includes build metadata, as go-versions' exact sets do."""

    major: int
    minor: int
    patch: int
    prerelease: str = ""
    build: str = ""
    _key: tuple[object, ...] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", _precedence(self))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + self.prerelease
        if self.build:
            text += "+" + self.build
        return text

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key < other._key

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    def without_build(self) -> Version:
        """The version semver precedence sees: build metadata has none."""
        return Version(self.major, self.minor, self.patch, self.prerelease)


def _precedence(v: Version) -> tuple[object, ...]:
    # semver 2.0 section 11: a release sorts after its prereleases; identifiers
    # compare numerically when numeric, lexically otherwise, numeric first.
    if not v.prerelease:
        return (v.major, v.minor, v.patch, 1, ())
    idents = tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in v.prerelease.split(".")
    )
    return (v.major, v.minor, v.patch, 0, idents)


# semver 2.0's grammar: ASCII digits only, and nothing after the end (not even the
# newline `$` would let through).
_STRICT_VERSION = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?\Z",
    re.ASCII,
)


def parse_version(text: str) -> Version:
    """A strict semver `X.Y.Z[-pre][+build]`, no `v`: the only form gitreg passes on
    to Terraform, which fails a whole version list on one bad entry
    (TERRAFORM-CLIENT.md, Providers)."""
    match = _STRICT_VERSION.match(text) if len(text) <= MAX_VERSION_LENGTH else None
    if not match:
        raise NotAVersion(f"{text[:80]!r} is not a semantic version (X.Y.Z)")
    major, minor, patch, pre, build = match.groups()
    return Version(int(major), int(minor), int(patch), pre or "", build or "")


def parse_tag_version(text: str) -> Version:
    """Strict semver with one optional leading `v`, as tags and module download
    paths may write it."""
    try:
        return parse_version(text[1:] if text[:1] in ("v", "V") else text)
    except NotAVersion as exc:
        raise NotAVersion(f"{text[:80]!r} is not a semantic version (X.Y.Z)") from exc


def sort_key(version: str) -> Version:
    """Sorts version strings by semver precedence."""
    return parse_version(version)


def _never(_item: object) -> bool:
    return False


def latest(
    items: Iterable[_T],
    version: Callable[[_T], str],
    yanked: Callable[[_T], bool] = _never,
) -> _T | None:
    """The item whose version gitreg offers as "latest", wherever it names one
    (browse API and its `/download` redirect, web UI and its snippets, search,
    CLI listings): the highest by semver precedence that is neither a
    prerelease nor yanked; when no release is left, the highest prerelease that
    is not yanked; None when every version is yanked (they leave every list)
    or there is none. As Terraform, which never selects a prerelease unless it
    is named exactly, a release is preferred to any prerelease, even a higher
    one. A version that does not parse (stored under older, looser rules) is
    never the latest."""
    best: tuple[Version, _T] | None = None
    best_pre: tuple[Version, _T] | None = None
    for item in items:
        if yanked(item):
            continue
        try:
            parsed = parse_version(version(item))
        except NotAVersion:
            continue
        if not parsed.is_prerelease:
            if best is None or best[0] < parsed:
                best = (parsed, item)
        elif best_pre is None or best_pre[0] < parsed:
            best_pre = (parsed, item)
    chosen = best or best_pre
    return chosen[1] if chosen is not None else None


# -- tags ----------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class TagVersion:
    """A version read from a tag. `key` is the version without build metadata:
    semver gives build metadata no precedence, so `1.0.0+a` and `1.0.0+b` are one
    version and the second is a conflict."""

    key: str
    version: str
    tag: str


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


def version_from_tag(tag: str, prefix: str = "") -> TagVersion:
    """Map a tag (without `refs/tags/`) to a version, or raise NotAVersion."""
    reason = unsafe_ref_reason(tag)
    if reason:
        raise NotAVersion(reason)
    if prefix and not tag.startswith(prefix):
        raise NotAVersion(f"does not start with the module's tag prefix {prefix!r}")
    parsed = parse_tag_version(tag[len(prefix) :])
    key = str(parsed.without_build())
    return TagVersion(key=key, version=str(parsed), tag=tag)


# -- constraints ---------------------------------------------------------------------------

# hashicorp/go-version's constraint grammar, applied to each comma-separated piece.
_GO_VERSION_PIECE = re.compile(
    r"^\s*(|=|!=|>|<|>=|<=|~>)\s*"
    r"v?([0-9]+(\.[0-9]+)*?)"
    r"(-([0-9]+[0-9A-Za-z\-~]*(\.[0-9A-Za-z\-~]+)*)|(-?([A-Za-z\-~]+[0-9A-Za-z\-~]*(\.[0-9A-Za-z\-~]+)*)))?"
    r"(\+([0-9A-Za-z\-~]+(\.[0-9A-Za-z\-~]+)*))?"
    r"?\s*$"
)

# go-versions' scanner (raw_scan.rl): operator, separator, numbers, prerelease, metadata.
_SCAN = re.compile(
    r"(?P<op>[^0-9\sA-Za-z.*]*)"
    r"(?P<sep>[\sv]*)"
    r"(?P<nums>(?:[0-9]+|[*xX])(?:\.(?:[0-9]+|[*xX]))*)"
    r"(?:-(?P<pre>[0-9A-Za-z.\-]+))?"
    r"(?:\+(?P<meta>[0-9A-Za-z.\-]+))?"
)

_OPERATORS = {"": "=", "=": "=", "!=": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<="}


@dataclass(frozen=True)
class Selection:
    """One piece of a constraint: an operator and its boundary version."""

    op: str  # "=", "!=", ">", ">=", "<", "<=", "~>minor", "~>patch"
    boundary: Version

    def allows(self, v: Version) -> bool:
        """Membership before the prerelease rule (go-versions' exact sets)."""
        b = self.boundary
        if self.op == "=":
            return v == b
        if self.op == "!=":
            return v != b
        if self.op == ">":
            return v > b
        if self.op == ">=":
            return v >= b
        if self.op == "<":
            return v < b
        if self.op == "<=":
            return v <= b
        upper = (
            Version(b.major, b.minor + 1, 0) if self.op == "~>patch" else Version(b.major + 1, 0, 0)
        )
        return b <= v < upper

    def __str__(self) -> str:
        if self.op.startswith("~>"):
            b = self.boundary
            shown = f"{b.major}.{b.minor}" if self.op == "~>minor" else str(b)
            return f"~> {shown}"
        return f"{'' if self.op == '=' else self.op + ' '}{self.boundary}"


@dataclass(frozen=True)
class Constraints:
    """The intersection of selections; empty means "any released version"."""

    selections: tuple[Selection, ...] = ()

    def __and__(self, other: Constraints) -> Constraints:
        return Constraints(self.selections + other.selections)

    def __str__(self) -> str:
        return ", ".join(str(s) for s in self.selections)

    def allows(self, v: Version) -> bool:
        if not all(s.allows(v) for s in self.selections):
            return False
        if not v.is_prerelease:
            return True
        # A prerelease counts only when requested by an exact selection (go-versions
        # MeetingConstraints: "pre-releases excluded except explicit exact selections").
        return any(s.op == "=" and s.boundary == v for s in self.selections)

    def newest(self, available: Iterable[Version]) -> Version | None:
        allowed = [v for v in available if self.allows(v)]
        return max(allowed) if allowed else None


def parse_constraints(text: str) -> Constraints:
    """Parse a `version` argument such as `">= 1.2, != 1.3.0, < 2"`."""
    if len(text) > MAX_CONSTRAINT_LENGTH:
        raise ConstraintError("version constraint is too long")
    for piece in text.split(","):
        if not _GO_VERSION_PIECE.match(piece):
            raise ConstraintError(f"malformed version constraint {piece.strip()[:80]!r}")
    selections: list[Selection] = []
    remain = text.strip()
    while remain:
        selection, rest = _parse_one(remain)
        selections.append(selection)
        remain = rest.strip()
        if remain:
            if remain.startswith("v"):
                raise ConstraintError('a "v" prefix should not be used when specifying versions')
            if not remain.startswith(","):
                raise ConstraintError(f"invalid characters {remain[:40]!r} in version constraint")
            remain = remain[1:].strip()
    return Constraints(tuple(selections))


def _parse_one(text: str) -> tuple[Selection, str]:
    match = _SCAN.match(text)
    if match is None:  # pragma: no cover - every prefix of nums is optional but nums
        raise ConstraintError(f"malformed version constraint {text[:80]!r}")
    raw_op, sep, nums, pre, meta = match.group("op", "sep", "nums", "pre", "meta")
    rest = text[match.end() :]
    if raw_op == "~>":
        op = "~>patch" if len(nums.split(".")) == 3 else "~>minor"
    elif raw_op in _OPERATORS:
        op = _OPERATORS[raw_op]
    elif raw_op in ("=<", "=>"):
        hint = "<=" if raw_op == "=<" else ">="
        raise ConstraintError(f'invalid constraint operator "{raw_op}"; did you mean "{hint}"?')
    else:
        raise ConstraintError(f"invalid constraint operator {raw_op[:20]!r}")
    if "v" in sep:
        raise ConstraintError('a "v" prefix should not be used when specifying versions')
    if sep and (not raw_op or sep != " "):
        raise ConstraintError(
            "extraneous spaces at start of specification"
            if not raw_op
            else f'only one space is expected after the operator "{raw_op}"'
        )
    parts = nums.split(".")
    if len(parts) > 3:
        raise ConstraintError(
            "too many numbered portions; only three are allowed (major, minor, patch)"
        )
    if any(p in ("*", "x", "X") for p in parts):
        raise ConstraintError("can't use wildcards; omit segments that should be unconstrained")
    numbers = [int(p) for p in parts] + [0] * (3 - len(parts))
    if any(n >= _MAX_NUMBER for n in numbers):
        raise ConstraintError("version number is too large")
    boundary = Version(numbers[0], numbers[1], numbers[2], pre or "", meta or "")
    if op not in ("=", "!="):
        # Metadata is only considered for exact matches (go-versions MeetingConstraints).
        boundary = Version(boundary.major, boundary.minor, boundary.patch, boundary.prerelease)
    return Selection(op, boundary), rest


def select(
    available: Iterable[Version], constraints: Constraints, locked: Version | None = None
) -> Version | None:
    """Terraform's choice: the locked version when it still meets the constraints
    (`terraform init` without `-upgrade`), else the newest allowed one."""
    versions = list(available)
    if locked is not None and constraints.allows(locked):
        return locked
    return constraints.newest(versions)

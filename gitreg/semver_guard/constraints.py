"""Comparing two version constraints (`required_version`, a provider's `version`)
by the released versions they allow.

A constraint is an intersection of comparisons with boundary versions
(gitreg/versions.py), so whether it allows a version changes only at a
boundary: probing every boundary of both constraints, the next patch after
each (the first release strictly between it and the next boundary), and the
ends, decides exactly which released versions one allows and the other does not.
"""

from __future__ import annotations

from typing import Literal

from gitreg.errors import GitregError
from gitreg.versions import Constraints, Version, parse_constraints

Relation = Literal["same", "wider", "narrower", "both", "unsure"]


def relation(old: str, new: str) -> tuple[Relation, str]:
    """How `new` relates to `old`: allows the same releases, more ("wider"),
    fewer ("narrower"), some fewer and some more ("both": callers lose versions
    they had), or "unsure" when either does not parse; with an example version."""
    if old.strip() == new.strip():
        return "same", ""
    try:
        before, after = _parse(old), _parse(new)
    except GitregError:
        return "unsure", ""
    lost = [v for v in _probes(before, after) if before.allows(v) and not after.allows(v)]
    gained = [v for v in _probes(before, after) if after.allows(v) and not before.allows(v)]
    if lost and gained:
        return "both", f"{lost[0]} is no longer allowed"
    if lost:
        return "narrower", f"{lost[0]} is no longer allowed"
    if gained:
        return "wider", f"{gained[0]} is now allowed"
    return "same", ""


def _parse(text: str) -> Constraints:
    return parse_constraints(text.strip()) if text.strip() else Constraints()


def _probes(*constraints: Constraints) -> list[Version]:
    edges = {Version(0, 0, 0)}
    for constraint in constraints:
        for s in constraint.selections:
            b = Version(s.boundary.major, s.boundary.minor, s.boundary.patch)
            edges.add(b)
            if s.op == "~>patch":
                edges.add(Version(b.major, b.minor + 1, 0))
            elif s.op == "~>minor":
                edges.add(Version(b.major + 1, 0, 0))
    probes = set(edges)
    for b in edges:
        probes.add(Version(b.major, b.minor, b.patch + 1))
    top = max(edges)
    probes.add(Version(top.major + 1, 0, 0))
    return sorted(probes)

"""Which `[[workload_identity.rules]]` a token's claims match, and the grants
they add up to (the vocabulary of `[[grants]]`: the highest scope per
namespace, "*" for every one).

Deny by default: no rule, no access. Two kinds of job run code that anyone
may have written, so a publish (or admin) rule matches them only when it
names the claim that tells them apart, saying so on purpose: a GitHub
Actions job for a pull request (`event_name` `pull_request` or
`pull_request_target`, which forks open), and a GitLab CI job on an
unprotected ref (`ref_protected` not `"true"`). A read rule matches them as
written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from gitreg.auth.tokens import Scope
from gitreg.workload_identity.config import EVERY_NAMESPACE, Rule, TrustedIssuer

PULL_REQUEST_EVENTS = frozenset({"pull_request", "pull_request_target"})


def claim(claims: Mapping[str, Any], path: str) -> object:
    """The claim named `path`: a top-level claim of that exact name (GitHub's
    and GitLab's are flat), else a path into objects, as in
    `kubernetes.io/serviceaccount/name`. None when there is none."""
    if path in claims:
        return claims[path]
    for at in range(len(path)):
        if path[at] != "/":
            continue
        head = claims.get(path[:at])
        if isinstance(head, Mapping):
            found = claim(head, path[at + 1 :])
            if found is not None:
                return found
    return None


def _text(value: object) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int) and not isinstance(value, bool):
        return str(value)
    return None


def _matches(value: object, patterns: Iterable[str]) -> bool:
    values = value if isinstance(value, list) else [value]
    texts = [t for t in (_text(v) for v in values) if t is not None]
    return any(fnmatchcase(text, pattern) for text in texts for pattern in patterns)


def untrusted_by(claims: Mapping[str, Any]) -> str:
    """The claim that marks the job as running code anyone may have proposed,
    or "" for a job of the repository's own refs."""
    if claims.get("event_name") in PULL_REQUEST_EVENTS:
        return "event_name"
    if "project_path" in claims and _text(claims.get("ref_protected")) != "true":
        return "ref_protected"
    return ""


def matching_rules(issuer: TrustedIssuer, claims: Mapping[str, Any]) -> list[Rule]:
    caution = untrusted_by(claims)
    found = []
    for rule in issuer.rules:
        if not all(_matches(claim(claims, name), patterns) for name, patterns in rule.claims):
            continue
        if caution and rule.scope > Scope.read and not rule.names(caution):
            continue
        found.append(rule)
    return found


def grants_of(rules: Iterable[Rule]) -> dict[str, Scope]:
    """Namespace (or "*") -> the highest scope the rules give there."""
    result: dict[str, Scope] = {}
    for rule in rules:
        if rule.scope > result.get(rule.namespace, 0):
            result[rule.namespace] = rule.scope
    everywhere = result.get(EVERY_NAMESPACE)
    if everywhere is not None:
        result = {ns: s for ns, s in result.items() if ns == EVERY_NAMESPACE or s > everywhere}
    return result

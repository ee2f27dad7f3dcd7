"""Permissions by identity-provider group (docs/sign-in.md).

The config file's `[[grants]]` tables map a group to a scope in a namespace:

    [[grants]]
    group = "platform-team"
    namespace = "platform"   # or "*" for every namespace
    scope = "publish"        # read | publish | admin, as `Scope`

A person signing in gets, per namespace, the highest scope any of their
groups grants there; a `*` grant applies to every namespace (and is the only
way to registry-wide actions). No grant at all means no token.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gitreg.auth.scopes import Scope
from gitreg.errors import BadRequest, ConfigError
from gitreg.setting_names import KeyCheck, refuse_unknown_keys

EVERY_NAMESPACE = "*"
GRANT_KEYS = frozenset({"group", "namespace", "scope"})


@dataclass(frozen=True)
class Grant:
    group: str
    namespace: str  # lower-cased, or "*"
    scope: Scope


def _text(entry: Mapping[str, Any], key: str, number: int) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"[[grants]] entry {number}: {key} must be a non-empty string")
    return value.strip()


def parse_grants(raw: object, keys: KeyCheck = refuse_unknown_keys) -> tuple[Grant, ...]:
    """The `[[grants]]` tables of the config file, as `Settings.grants`."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError("grants must be an array of tables: [[grants]]")
    grants = []
    for number, entry in enumerate(raw, start=1):
        if not isinstance(entry, dict):
            raise ConfigError(f"[[grants]] entry {number} must be a table")
        keys("grants", entry, GRANT_KEYS)
        group = _text(entry, "group", number)
        namespace = _text(entry, "namespace", number).lower()
        try:
            scope = Scope.parse(_text(entry, "scope", number))
        except BadRequest as exc:
            raise ConfigError(f"[[grants]] entry {number}: {exc}") from exc
        grants.append(Grant(group, namespace, scope))
    return tuple(grants)


def effective(grants: Iterable[Grant], groups: Iterable[str]) -> dict[str, Scope]:
    """Namespace (or "*") -> the highest scope the groups grant there. Groups
    compare exactly: IdPs treat them as opaque, case-sensitive names."""
    member = set(groups)
    result: dict[str, Scope] = {}
    for grant in grants:
        if grant.group in member and grant.scope > result.get(grant.namespace, 0):
            result[grant.namespace] = grant.scope
    # A namespace grant weaker than the "*" grant adds nothing: drop it so the
    # stored token says exactly what it allows.
    everywhere = result.get(EVERY_NAMESPACE)
    if everywhere is not None:
        result = {ns: s for ns, s in result.items() if ns == EVERY_NAMESPACE or s > everywhere}
    return result

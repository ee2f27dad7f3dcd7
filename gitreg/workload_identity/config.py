"""The `[[workload_identity]]` tables of the config file (docs/ci.md):

    [[workload_identity]]
    issuer = "https://token.actions.githubusercontent.com"
    audience = "https://registry.example.com"
    ca_file = "/etc/ssl/cluster-ca.pem"      # optional: an issuer behind a private CA

    [[workload_identity.rules]]
    claims = { repository = "acme/provider-ourcloud", ref = "refs/tags/*" }
    namespace = "acme"                         # or "*" for every namespace
    scope = "publish"                          # read | publish | admin, as [[grants]]

A rule matches a token when every claim it names matches: a string is a glob
(`*`, `?`, `[...]`, compared case-sensitively; `*` also matches `/`), a list
is any of its globs, a boolean is that value. A claim inside an object is
named by its path, `kubernetes.io/serviceaccount/name`. A rule must name at
least one claim: a rule that matched every token of an issuer would trust
every job anyone runs there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gitreg.auth.scopes import Scope
from gitreg.errors import BadRequest, ConfigError
from gitreg.setting_names import KeyCheck, refuse_unknown_keys

EVERY_NAMESPACE = "*"
# `[[workload_identity]]` entries hold `[[workload_identity.rules]]` of their own.
WORKLOAD_IDENTITY_KEYS = frozenset({"issuer", "audience", "rules", "ca_file"})
WORKLOAD_RULE_KEYS = frozenset({"claims", "namespace", "scope"})


@dataclass(frozen=True)
class Rule:
    label: str  # where it is written: "workload_identity[1].rules[2]"
    claims: tuple[tuple[str, tuple[str, ...]], ...]  # claim path -> any of these globs
    namespace: str  # lower-cased, or "*"
    scope: Scope

    def names(self, claim: str) -> bool:
        return any(name == claim for name, _ in self.claims)


@dataclass(frozen=True)
class TrustedIssuer:
    issuer: str
    audience: str
    rules: tuple[Rule, ...]
    ca_file: str = ""


def _text(entry: Mapping[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {key} must be a non-empty string")
    return value.strip()


def _patterns(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, bool):
        return ("true" if value else "false",)
    if isinstance(value, str) and value:
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise ConfigError(f"{where} must be a non-empty string, a boolean or a list of strings")


def _rule(raw: object, where: str, keys: KeyCheck) -> Rule:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where} must be a table")
    keys("workload_identity.rules", raw, WORKLOAD_RULE_KEYS)
    claims = raw.get("claims")
    if not isinstance(claims, Mapping) or not claims:
        raise ConfigError(f"{where}: claims must be a table naming at least one claim")
    matched = tuple(
        (str(name), _patterns(value, f"{where}: claim {name}")) for name, value in claims.items()
    )
    namespace = _text(raw, "namespace", where).lower()
    try:
        scope = Scope.parse(_text(raw, "scope", where))
    except BadRequest as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    return Rule(where, matched, namespace, scope)


def parse_workload_identity(
    raw: object, keys: KeyCheck = refuse_unknown_keys
) -> tuple[TrustedIssuer, ...]:
    """The `[[workload_identity]]` tables, as `Settings.workload_identity`;
    ConfigError for anything gitreg would not read as written."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError("workload_identity must be an array of tables: [[workload_identity]]")
    issuers = []
    seen: set[tuple[str, str]] = set()
    for number, entry in enumerate(raw, start=1):
        where = f"workload_identity[{number}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where} must be a table")
        keys("workload_identity", entry, WORKLOAD_IDENTITY_KEYS)
        issuer = _text(entry, "issuer", where)
        parts = urlsplit(issuer)
        if parts.scheme != "https" or not parts.hostname or parts.query or parts.fragment:
            raise ConfigError(f"{where}: issuer must be an https URL, not {issuer[:100]!r}")
        audience = _text(entry, "audience", where)
        if (issuer, audience) in seen:
            raise ConfigError(f"{where}: issuer {issuer} with audience {audience} is listed twice")
        seen.add((issuer, audience))
        rules = entry.get("rules")
        if not isinstance(rules, list) or not rules:
            raise ConfigError(f"{where}: give at least one [[workload_identity.rules]] table")
        parsed = tuple(_rule(r, f"{where}.rules[{n}]", keys) for n, r in enumerate(rules, start=1))
        ca_file = entry.get("ca_file", "")
        if not isinstance(ca_file, str):
            raise ConfigError(f"{where}: ca_file must be a path")
        issuers.append(TrustedIssuer(issuer, audience, parsed, ca_file))
    return tuple(issuers)

"""Which names are settings: a name gitreg does not read is refused, never ignored.

A mistyped setting (`read_defualt = "token"` in the config file,
`GITREG_READ_DEFUALT=token` in the environment) would otherwise leave the
default in force without a word: a registry meant to be private would stay
public. So every key of the config file, every key of its tables and every
`GITREG_*` variable must be one gitreg reads (docs/configuration.md, "Unknown
settings"); `load_settings` stops at the first other one, and `gitreg doctor`
lists them all.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

ENV_PREFIX = "GITREG_"

# The config file's tables, kept in `Settings.extra` and read by their features
# (docs/configuration.md): table -> the keys of one entry. `[[grants]]` and
# `[[module_proxy]]` are arrays of such entries (`[module_proxy]` alone is one
# entry), `[forges.NAME]` is a table of them, and `[upstreams]` maps hostnames
# (any key) to base URLs.
GRANT_KEYS = frozenset({"group", "namespace", "scope"})
FORGE_KEYS = frozenset({"kind", "api_url", "token", "ca_file", "hosts", "allow_http"})
MODULE_PROXY_KEYS = frozenset({"host", "url", "namespaces"})
# `[[workload_identity]]` entries hold `[[workload_identity.rules]]` of their own.
WORKLOAD_IDENTITY_KEYS = frozenset({"issuer", "audience", "rules", "ca_file"})
WORKLOAD_RULE_KEYS = frozenset({"claims", "namespace", "scope"})
TABLES = ("grants", "forges", "module_proxy", "upstreams", "workload_identity")

# `GITREG_*` variables that are not settings but are read by gitreg's own
# tools, so a shell that exports them can still run gitreg:
NOT_SETTINGS_VARIABLES = frozenset(
    {
        "GITREG_CONFIG",  # the config file (`--config`)
        "GITREG_TOKEN",  # `gitreg provider publish --url`, and hooks/post-receive
        "GITREG_URL",  # hooks/post-receive
        "GITREG_TOKEN_FILE",  # hooks/post-receive
        "GITREG_REPO",  # hooks/post-receive
        "GITREG_CACERT",  # hooks/post-receive
        "GITREG_HOSTNAME",  # deploy/compose*.yml and deploy/Caddyfile
        "GITREG_UPSTREAMS",  # deploy/Caddyfile
    }
)
# Prefixes kept for gitreg's test suite and benchmarks.
NOT_SETTINGS_PREFIXES = ("GITREG_TEST_", "GITREG_BENCH_")


@dataclass(frozen=True)
class UnknownSetting:
    name: str  # as the operator wrote it: `read_defualt`, `forges.ghe.api_ur`, `GITREG_X`
    where: str  # the config file's path, or "the environment"
    suggestion: str  # the closest known name, or ""

    def __str__(self) -> str:
        hint = f" (did you mean {self.suggestion!r}?)" if self.suggestion else ""
        return f"unknown setting {self.name!r} in {self.where}{hint}"


def _closest(name: str, known: Collection[str]) -> str:
    found = difflib.get_close_matches(name, sorted(known), n=1)
    return found[0] if found else ""


def _entries(table: str, value: Any) -> Iterator[tuple[str, Mapping[str, Any], frozenset[str]]]:
    """(dotted prefix, entry, its keys) for each entry of a table whose keys are fixed."""
    if table == "grants" and isinstance(value, list):
        yield from ((table, e, GRANT_KEYS) for e in value if isinstance(e, Mapping))
    elif table == "module_proxy":
        entries = [value] if isinstance(value, Mapping) else value
        if isinstance(entries, list):
            yield from ((table, e, MODULE_PROXY_KEYS) for e in entries if isinstance(e, Mapping))
    elif table == "workload_identity" and isinstance(value, list):
        for entry in value:
            if isinstance(entry, Mapping):
                yield table, entry, WORKLOAD_IDENTITY_KEYS
                rules = entry.get("rules")
                if isinstance(rules, list):
                    for rule in rules:
                        if isinstance(rule, Mapping):
                            yield f"{table}.rules", rule, WORKLOAD_RULE_KEYS
    elif table == "forges" and isinstance(value, Mapping):
        for forge, entry in value.items():
            if isinstance(entry, Mapping):
                yield f"{table}.{forge}", entry, FORGE_KEYS
    # Shapes the features refuse themselves (`grants = 1`) are left to them.


def in_file(raw: Mapping[str, Any], where: str, fields: Collection[str]) -> list[UnknownSetting]:
    """The config file's unknown keys, top-level first, then each table's.
    `fields` are the settings' names (dashes in keys count as underscores)."""
    top = {*fields, *TABLES}
    found = []
    for key in raw:
        name = key.replace("-", "_")
        if name not in top:
            found.append(UnknownSetting(key, where, _closest(name, top)))
    for table in TABLES:
        for prefix, entry, keys in _entries(table, raw.get(table)):
            for key in entry:
                if key not in keys:
                    close = _closest(key, keys)
                    hint = f"{prefix}.{close}" if close else ""
                    found.append(UnknownSetting(f"{prefix}.{key}", where, hint))
    return found


def _references(value: Any) -> Iterator[str]:
    """Variables named by `env:NAME` secret references (gitreg/secret_refs.py)."""
    if isinstance(value, str) and value.startswith("env:"):
        yield value[4:]
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _references(item)
    elif isinstance(value, list):
        for item in value:
            yield from _references(item)


def in_environment(
    environ: Mapping[str, str], raw: Mapping[str, Any], fields: Collection[str]
) -> list[UnknownSetting]:
    """`GITREG_*` variables that are no setting, no variable of gitreg's own
    tools, and not named by an `env:` reference in the file or the environment."""
    known = {ENV_PREFIX + name.upper() for name in fields}
    referenced = {*_references(raw), *_references([environ[n] for n in known & set(environ)])}
    found = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name.startswith(NOT_SETTINGS_PREFIXES):
            continue
        if name in known or name in NOT_SETTINGS_VARIABLES or name in referenced:
            continue
        # Compared without the prefix, which every name shares.
        close = _closest(name.removeprefix(ENV_PREFIX).lower(), fields)
        hint = ENV_PREFIX + close.upper() if close else ""
        found.append(UnknownSetting(name, "the environment", hint))
    return found

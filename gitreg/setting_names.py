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
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gitreg.errors import ConfigError

ENV_PREFIX = "GITREG_"

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


# How a table's parser reports the keys of one entry: `keys(prefix, entry,
# known)` with the entry's dotted name (`grants`, `forges.ghe`) and the keys it
# may have. `load_settings` passes a `KeyCollector`; a parser called on its own
# refuses at the first unknown key (`refuse_unknown_keys`).
KeyCheck = Callable[[str, Mapping[str, Any], Collection[str]], None]


def _unknown_keys(
    prefix: str, entry: Mapping[str, Any], known: Collection[str], where: str
) -> Iterator[UnknownSetting]:
    for key in entry:
        if key not in known:
            close = _closest(key, known)
            yield UnknownSetting(f"{prefix}.{key}", where, f"{prefix}.{close}" if close else "")


def refuse_unknown_keys(prefix: str, entry: Mapping[str, Any], known: Collection[str]) -> None:
    """The `KeyCheck` of a parser called on its own: stops at the first unknown key."""
    for found in _unknown_keys(prefix, entry, known, "the config file"):
        hint = f" (did you mean {found.suggestion!r}?)" if found.suggestion else ""
        raise ConfigError(f"unknown key {found.name!r}{hint}", user_input=True)


class KeyCollector:
    """A `KeyCheck` that keeps every unknown key of the file at `where`."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.found: list[UnknownSetting] = []

    def __call__(self, prefix: str, entry: Mapping[str, Any], known: Collection[str]) -> None:
        self.found.extend(_unknown_keys(prefix, entry, known, self.where))


def in_file(raw: Mapping[str, Any], where: str, fields: Collection[str]) -> list[UnknownSetting]:
    """The config file's unknown top-level keys. `fields` are the names of the
    settings and of the tables (dashes in keys count as underscores); the keys
    inside each table are checked by its parser, through a `KeyCheck`."""
    found = []
    for key in raw:
        name = key.replace("-", "_")
        if name not in fields:
            found.append(UnknownSetting(key, where, _closest(name, fields)))
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

"""Validation of the parts of module addresses (`namespace/name/system`).

The rules follow the public registry's: namespace and name are letters, digits,
`-` and `_`, starting and ending with a letter or digit, at most 64 characters;
the system is lower-case letters and digits. Paths keep the user's case, so
validation is case-insensitive and lookups use a lower-cased key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gitreg.errors import BadRequest

_NAME = re.compile(r"^[0-9A-Za-z](?:[0-9A-Za-z_-]{0,62}[0-9A-Za-z])?$")
_SYSTEM = re.compile(r"^[0-9A-Za-z]{1,64}$")


@dataclass(frozen=True)
class ModuleAddress:
    namespace: str
    name: str
    system: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}/{self.system}"


def check_name(kind: str, value: str) -> str:
    if not _NAME.match(value):
        raise BadRequest(
            f"invalid {kind} {value[:80]!r}: use letters, digits, '-' and '_',"
            " starting and ending with a letter or digit, at most 64 characters"
        )
    return value


def check_system(value: str) -> str:
    if not _SYSTEM.match(value):
        raise BadRequest(f"invalid system {value[:80]!r}: use letters and digits only")
    return value


def module_address(namespace: str, name: str, system: str) -> ModuleAddress:
    return ModuleAddress(
        check_name("namespace", namespace), check_name("name", name), check_system(system)
    )


def parse_module_address(text: str) -> ModuleAddress:
    """`NAMESPACE/NAME/SYSTEM` as typed on the command line."""
    parts = text.strip().split("/")
    if len(parts) != 3:
        raise BadRequest(f"module address must be NAMESPACE/NAME/SYSTEM, got {text[:120]!r}")
    return module_address(*parts)


def check_subdir(value: str) -> str:
    """A monorepo subdirectory: relative, normalised, no `..` or `.git`."""
    cleaned = value.strip().strip("/")
    if not cleaned:
        return ""
    parts = cleaned.split("/")
    for part in parts:
        if part in ("", ".", "..") or part.lower() == ".git" or "\\" in part or "\x00" in part:
            raise BadRequest(f"invalid subdirectory {value[:120]!r}")
    return "/".join(parts)

"""What `terraform init` / `tofu init` installed: `.terraform/modules/modules.json`.

Each entry has the module's `Key` (its path of call names, `net.subnets`),
`Source`, `Version` (registry modules only) and `Dir` (relative to the working
directory). Registry sources are `[HOST/]NAMESPACE/NAME/SYSTEM[//SUBDIR]`, the
host `registry.terraform.io` when left out; anything else (git, http, local
paths) is not installed from a registry and has no statement to check.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from gitreg.errors import BadRequest

DEFAULT_HOST = "registry.terraform.io"
MANIFEST = Path(".terraform") / "modules" / "modules.json"
_PART = r"[0-9A-Za-z](?:[0-9A-Za-z_-]{0,62}[0-9A-Za-z])?"
_REGISTRY = re.compile(
    rf"^(?:(?P<host>[^/:]+\.[^/]*|[^/]+:[0-9]+)/)?(?P<ns>{_PART})/(?P<name>{_PART})"
    rf"/(?P<system>[0-9a-z]{{1,64}})(?://(?P<subdir>.*))?$"
)


@dataclass(frozen=True)
class Installed:
    key: str
    source: str
    version: str
    dir: Path  # absolute


@dataclass(frozen=True)
class RegistryModule:
    installed: Installed
    host: str
    namespace: str
    name: str
    system: str
    subdir: str

    @property
    def address(self) -> str:
        return f"{self.namespace}/{self.name}/{self.system}"


def read_manifest(workdir: Path) -> list[Installed]:
    """The installed modules, the root module left out; BadRequest when the
    directory was not initialised."""
    path = workdir / MANIFEST
    try:
        document = json.loads(path.read_text("utf-8"))
        entries = document["Modules"]
    except FileNotFoundError:
        raise BadRequest(f"no {path}: run `terraform init` (or `tofu init`) there first") from None
    except OSError as exc:
        raise BadRequest(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, RecursionError):
        raise BadRequest(f"{path} is not a module manifest") from None
    found = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not entry.get("Key"):
            continue  # the root module
        try:
            directory = (workdir / str(entry.get("Dir", ""))).resolve()
        except (OSError, ValueError):  # a NUL byte, a symlink loop
            raise BadRequest(f"{path} is not a module manifest") from None
        found.append(
            Installed(
                key=str(entry["Key"]),
                source=str(entry.get("Source", "")),
                version=str(entry.get("Version", "")),
                dir=directory,
            )
        )
    return sorted(found, key=lambda m: m.key)


def registry_module(installed: Installed) -> RegistryModule | None:
    """The registry address of an installed module, or None for a git, URL or
    local source."""
    if not installed.version:
        return None
    source = installed.source.removeprefix("registry+")
    found = _REGISTRY.match(source)
    if found is None:
        return None
    return RegistryModule(
        installed=installed,
        host=(found["host"] or DEFAULT_HOST).lower(),
        namespace=found["ns"],
        name=found["name"],
        system=found["system"],
        subdir=found["subdir"] or "",
    )

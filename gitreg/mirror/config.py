"""What providers a Terraform configuration needs, read from its files.

Every `.tf` file under a path is parsed with python-hcl2 (docs/mirror.md says
why). Each directory is one module, as for Terraform. Modules called with a
local `source = "./..."` are children of their caller; a directory no other
directory calls is a root configuration, and its `.terraform.lock.hcl` is read
when present. Requirements are per root: the constraints of every module in
the root's tree are intersected, exactly as `terraform init` merges them.

A provider is required by a module when `required_providers` names it, and also
implicitly, like Terraform does, when a `provider` block, a `resource` or a
`data` block uses a local name that `required_providers` does not declare: that
name means `registry.terraform.io/hashicorp/NAME`.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitreg.addresses import (
    BUILTIN_HOSTNAME,
    DEFAULT_HOSTNAME,
    ProviderAddress,
    parse_provider_source,
    provider_address,
)
from gitreg.errors import BadRequest, ConfigError
from gitreg.versions import Constraints, Version, parse_constraints, parse_version

if TYPE_CHECKING:  # python-hcl2 and lark are imported on first parse: this
    # module is loaded by the CLI parser that `gitreg serve` builds too, and a
    # serving worker need not carry them (its memory budget: docs/performance.md)
    from hcl2.utils import SerializationOptions


@functools.cache
def _options() -> SerializationOptions:
    from hcl2.utils import SerializationOptions

    return SerializationOptions(
        with_comments=False, explicit_blocks=False, strip_string_quotes=True
    )


log = logging.getLogger("gitreg.mirror.config")

LOCK_FILE = ".terraform.lock.hcl"
MAX_FILE_BYTES = 8 * 1024 * 1024
# Directories Terraform itself never reads configuration from.
_SKIP_DIRS = {".terraform", ".git", "node_modules"}


@dataclass(frozen=True)
class LockedProvider:
    address: ProviderAddress
    version: Version
    hashes: tuple[str, ...]


@dataclass
class Module:
    path: Path
    requirements: dict[ProviderAddress, Constraints] = field(default_factory=dict)
    children: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class RootConfiguration:
    """One configuration `terraform init` would be run in."""

    path: Path
    requirements: dict[ProviderAddress, Constraints]
    locks: dict[ProviderAddress, LockedProvider]
    notes: list[str]


def read_configurations(path: Path) -> list[RootConfiguration]:
    """All root configurations under `path` (a directory, or one `.tf` file's directory)."""
    base = path.parent if path.is_file() else path
    if not base.is_dir():
        raise ConfigError(f"{path} is not a directory", user_input=True)
    modules = {d: _read_module(d, files) for d, files in _module_dirs(base.resolve())}
    if not modules:
        raise ConfigError(f"no .tf files under {path}", user_input=True)
    called = {child for m in modules.values() for child in m.children}
    roots = [d for d in sorted(modules) if d not in called]
    if not roots:  # every module is called by another: a cycle, so start anywhere
        roots = sorted(modules)[:1]
    return [_root(d, modules) for d in roots]


def _module_dirs(base: Path) -> Iterator[tuple[Path, list[Path]]]:
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        files = sorted(Path(dirpath) / f for f in filenames if f.endswith(".tf"))
        if files:
            yield Path(dirpath), files


def _root(start: Path, modules: dict[Path, Module]) -> RootConfiguration:
    requirements: dict[ProviderAddress, Constraints] = {}
    notes: list[str] = []
    seen: set[Path] = set()
    pending = [start]
    while pending:
        directory = pending.pop()
        if directory in seen or directory not in modules:
            continue
        seen.add(directory)
        module = modules[directory]
        notes.extend(module.notes)
        for address, constraints in module.requirements.items():
            requirements[address] = requirements.get(address, Constraints()) & constraints
        pending.extend(module.children)
    lock_path = start / LOCK_FILE
    locks = read_lock_file(lock_path) if lock_path.is_file() else {}
    return RootConfiguration(start, requirements, locks, notes)


def _load(path: Path) -> dict[str, Any]:
    import hcl2
    from lark.exceptions import LarkError

    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES} bytes", user_input=True)
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", user_input=True) from exc
    try:
        loaded = hcl2.loads(text, serialization_options=_options())
    except (LarkError, ValueError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{path}: not valid HCL: {first[:200]}", user_input=True) from exc
    return loaded if isinstance(loaded, dict) else {}


def _static_string(value: Any, what: str, path: Path) -> str:
    # Terraform requires literal strings here: no variables or functions.
    if not isinstance(value, str) or "${" in value:
        raise ConfigError(f"{path}: {what} must be a literal string", user_input=True)
    return value


def _blocks(document: dict[str, Any], name: str) -> Iterator[dict[str, Any]]:
    for block in document.get(name, []) or []:
        if isinstance(block, dict):
            yield block


def _read_module(directory: Path, files: list[Path]) -> Module:
    module = Module(directory)
    declared: dict[str, ProviderAddress] = {}
    constraints: dict[str, Constraints] = {}
    used: set[str] = set()
    for path in files:
        document = _load(path)
        for terraform in _blocks(document, "terraform"):
            for required in terraform.get("required_providers", []) or []:
                if isinstance(required, dict):
                    _declare(required, path, declared, constraints)
        for provider in _blocks(document, "provider"):
            used.update(provider)
        for kind in ("resource", "data"):
            for block in _blocks(document, kind):
                for type_name, instances in block.items():
                    used.add(_local_name(type_name, instances))
        for call in _blocks(document, "module"):
            for name, body in call.items():
                _module_call(module, directory, name, body, path)
    for local in sorted(used - set(declared)):
        # Implied provider: hashicorp/NAME on the public registry (Terraform's
        # addrs.ImpliedProviderForUnqualifiedType); "terraform" is built in.
        if local and local != "terraform":
            try:
                declared[local] = provider_address(DEFAULT_HOSTNAME, "hashicorp", local)
            except BadRequest:
                module.notes.append(f"{directory}: cannot infer a provider for {local!r}")
    for local, address in declared.items():
        if address.hostname == BUILTIN_HOSTNAME:
            continue
        module.requirements[address] = module.requirements.get(
            address, Constraints()
        ) & constraints.get(local, Constraints())
    return module


def _declare(
    required: dict[str, Any],
    path: Path,
    declared: dict[str, ProviderAddress],
    constraints: dict[str, Constraints],
) -> None:
    for local, spec in required.items():
        source: str | None = None
        version: str | None = None
        if isinstance(spec, str):
            version = _static_string(spec, f"required_providers.{local}", path)
        elif isinstance(spec, dict):
            if "source" in spec:
                source = _static_string(spec["source"], f"{local}.source", path)
            if "version" in spec and spec["version"] is not None:
                version = _static_string(spec["version"], f"{local}.version", path)
        else:
            raise ConfigError(
                f"{path}: required_providers.{local} must be an object", user_input=True
            )
        try:
            address = (
                parse_provider_source(source)
                if source
                else provider_address(DEFAULT_HOSTNAME, "hashicorp", local)
            )
            parsed = parse_constraints(version) if version is not None else Constraints()
        except BadRequest as exc:
            raise ConfigError(f"{path}: provider {local!r}: {exc}", user_input=True) from exc
        declared[local] = address
        constraints[local] = constraints.get(local, Constraints()) & parsed


def _local_name(type_name: str, instances: Any) -> str:
    """`aws_instance` uses local name `aws` unless `provider = other.alias` says otherwise."""
    if isinstance(instances, dict):
        for body in instances.values():
            chosen = body.get("provider") if isinstance(body, dict) else None
            if isinstance(chosen, str):
                return chosen.removeprefix("${").removesuffix("}").split(".")[0]
    return type_name.split("_", 1)[0]


def _module_call(module: Module, directory: Path, name: str, body: Any, path: Path) -> None:
    source = body.get("source") if isinstance(body, dict) else None
    if not isinstance(source, str):
        return
    if source.startswith(("./", "../")):
        child = (directory / source).resolve()
        module.children.append(child)
        if not child.is_dir():
            module.notes.append(f"{path}: module {name!r}: {source} does not exist")
    else:
        module.notes.append(
            f"{path}: module {name!r} comes from {source[:120]}; only local modules are read"
            " (run `gitreg mirror sync` on its source too)"
        )


def read_lock_file(path: Path) -> dict[ProviderAddress, LockedProvider]:
    """`.terraform.lock.hcl`: `provider "HOST/NS/TYPE" { version, constraints, hashes }`."""
    locks: dict[ProviderAddress, LockedProvider] = {}
    for block in _blocks(_load(path), "provider"):
        for name, body in block.items():
            if not isinstance(body, dict):
                continue
            try:
                address = parse_provider_source(name)
                version = parse_version(_static_string(body.get("version"), "version", path))
            except (BadRequest, ConfigError) as exc:
                raise ConfigError(
                    f"{path}: provider {name[:120]!r}: {exc}", user_input=True
                ) from exc
            hashes = tuple(h for h in body.get("hashes", []) or [] if isinstance(h, str))
            locks[address] = LockedProvider(address, version, hashes)
    return locks

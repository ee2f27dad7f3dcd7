"""`gitreg modules prefetch DIR`: cache every proxied module a configuration calls.

Every `.tf` file under DIR is read with python-hcl2, like `mirror sync` does
for providers (gitreg.mirror.config, docs/mirror.md). A `module` block whose
`source` is a registry address (`[HOST/]NAMESPACE/NAME/SYSTEM[//SUBDIR]`) in
a proxied namespace has every version that meets its `version` constraint
(gitreg's own constraint logic, as Terraform's) cached. The `.tf` files of
each cached archive are read the same way, so nested calls to other public
modules are cached too (docs/module-proxy.md, "Nested calls").
"""

from __future__ import annotations

import functools
import io
import logging
import os
import re
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gitreg.addresses import ModuleAddress, module_address
from gitreg.errors import BadRequest, ConfigError, GitregError
from gitreg.module_proxy.store import ProxiedVersion
from gitreg.storage.blobs import BlobStore
from gitreg.versions import Constraints, parse_constraints, parse_version

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


log = logging.getLogger("gitreg.module_proxy.prefetch")

MAX_FILE_BYTES = 8 * 1024 * 1024
_SKIP_DIRS = {".terraform", ".git", "node_modules"}
_REGISTRY = re.compile(r"^(?:([A-Za-z0-9.:-]+)/)?([^/:]+)/([^/]+)/([^/]+?)(?://.*)?$")


@dataclass(frozen=True)
class ModuleCall:
    address: ModuleAddress
    constraints: Constraints
    where: str


@dataclass
class PrefetchResult:
    cached: list[str] = field(default_factory=list)  # "NS/NAME/SYSTEM VERSION"
    failed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


Report = Callable[[str], None]


class Proxy(Protocol):
    """What a prefetch asks of the module proxy (gitreg.module_proxy.service)."""

    def handles(self, namespace: str) -> bool: ...

    async def versions(self, address: ModuleAddress) -> list[str]: ...

    async def cached(self, address: ModuleAddress, version: str) -> ProxiedVersion: ...


def calls_in_text(text: str, where: str, notes: list[str]) -> Iterator[ModuleCall]:
    import hcl2
    from lark.exceptions import LarkError

    try:
        document = hcl2.loads(text, serialization_options=_options())
    except (LarkError, ValueError, TypeError) as exc:
        notes.append(f"{where}: not valid HCL ({type(exc).__name__}); skipped")
        return
    for block in document.get("module", []) if isinstance(document, dict) else []:
        for name, body in block.items() if isinstance(block, dict) else []:
            call = _call(body, f"{where}: module {name!r}", notes)
            if call is not None:
                yield call


def _call(body: Any, where: str, notes: list[str]) -> ModuleCall | None:
    source = body.get("source") if isinstance(body, dict) else None
    if not isinstance(source, str) or source.startswith(("./", "../")):
        return None
    match = _REGISTRY.match(source)
    if match is None or "::" in source or "${" in source:
        return None  # a git, https or other go-getter source: not a registry module
    version = body.get("version")
    try:
        address = module_address(match[2], match[3], match[4])
        constraints = parse_constraints(version) if isinstance(version, str) else Constraints()
    except BadRequest as exc:
        notes.append(f"{where}: {exc}")
        return None
    return ModuleCall(address, constraints, where)


def calls_in_dir(path: Path, notes: list[str]) -> list[ModuleCall]:
    if not path.is_dir():
        raise ConfigError(f"{path} is not a directory", user_input=True)
    found: list[ModuleCall] = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for filename in sorted(f for f in filenames if f.endswith(".tf")):
            file = Path(dirpath) / filename
            if file.stat().st_size > MAX_FILE_BYTES:
                notes.append(f"{file}: larger than {MAX_FILE_BYTES} bytes; skipped")
                continue
            text = file.read_text(encoding="utf-8", errors="replace")
            found.extend(calls_in_text(text, str(file), notes))
    return found


def _calls_in_archive(data: bytes, where: str, notes: list[str]) -> list[ModuleCall]:
    found: list[ModuleCall] = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".tf") and member.size <= MAX_FILE_BYTES:
                extracted = tar.extractfile(member)
                if extracted is not None:
                    text = extracted.read().decode("utf-8", errors="replace")
                    found.extend(calls_in_text(text, f"{where}/{member.name}", notes))
    return found


async def prefetch(service: Proxy, blobs: BlobStore, path: Path, report: Report) -> PrefetchResult:
    """Cache every matching version of every proxied module called under `path`;
    `blobs` holds the archives, read for the calls they make in turn."""
    result = PrefetchResult()
    pending = calls_in_dir(path, result.notes)
    seen: set[tuple[str, str]] = set()
    while pending:
        call = pending.pop(0)
        if not service.handles(call.address.namespace):
            result.notes.append(f"{call.where}: {call.address} is not in a proxied namespace")
            continue
        try:
            listed = await service.versions(call.address)
        except GitregError as exc:
            result.failed.append(f"{call.address}: {exc}")
            continue
        wanted = [v for v in listed if call.constraints.allows(parse_version(v))]
        if not wanted:
            result.notes.append(f"{call.where}: no version of {call.address} meets the constraint")
        for version in wanted:
            if (str(call.address), version) in seen:
                continue
            seen.add((str(call.address), version))
            pending.extend(await _one(service, blobs, call.address, version, result, report))
    return result


async def _one(
    service: Proxy,
    blobs: BlobStore,
    address: ModuleAddress,
    version: str,
    result: PrefetchResult,
    report: Report,
) -> list[ModuleCall]:
    label = f"{address} {version}"
    report(f"fetching {label}")
    try:
        record = await service.cached(address, version)
    except GitregError as exc:
        result.failed.append(f"{label}: {exc}")
        report(f"failed   {label}: {exc}")
        return []
    result.cached.append(label)
    report(f"cached   {label} ({record.commit_sha[:12]}, {record.archive_size} bytes)")
    with blobs.open(record.archive_sha256) as raw:
        data = raw.read()
    return _calls_in_archive(data, label, result.notes)

"""`Verifier`: checks what `terraform init` installed against the registries'
signed statements and transparency logs, and keeps `modules.lock.json`
(docs/verify.md).

For each module installed from a registry that serves attestations:
1. the statement's DSSE signature verifies with a key the registry lists, and
   it is about this module and version;
2. the `dirHash` of the installed tree (the whole extracted archive, above a
   `//subdir`) is the statement's; when it is not, the archive is fetched
   (checked against the statement's sha256) to name the first file that
   differs;
3. the statement's publish entry is in the log: the entry binds the
   statement's hash, and its inclusion proof, built from the tiles, leads to
   the root of a checkpoint signed by the registry;
4. that checkpoint is consistent with the one in the lock file (the log was
   only appended to since);
5. against the lock file: with `readonly`, a module or version it does not
   list, or a hash that differs, fails; otherwise an upgrade is recorded, but
   a statement whose `dirHash` differs from the one recorded for the same
   version fails.

Git, URL and local-path modules are listed as not verifiable, not failed.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitreg.archives.dirhash import archive_files, hash1, tree_files
from gitreg.attestations import dsse
from gitreg.attestations.keys import verify_ed25519
from gitreg.attestations.note import Checkpoint
from gitreg.attestations.tlog import (
    TILE_WIDTH,
    TreeReader,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)
from gitreg.errors import BadRequest
from gitreg.verify.lockfile import Locked, LockedCheckpoint, LockFile
from gitreg.verify.manifest import Installed, RegistryModule, read_manifest, registry_module
from gitreg.verify.registry import NoAttestations, Registry, RegistryError

THREADS = 8


class Failed(Exception):
    """One module does not verify; the message says why, in one line."""


@dataclass
class Report:
    verified: list[str] = field(default_factory=list)
    unverifiable: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    lock: LockFile = field(default_factory=LockFile)


@dataclass(frozen=True)
class _Checked:
    module: RegistryModule
    locked: Locked


class Verifier:
    def __init__(self, registry: Callable[[str], Registry]) -> None:
        self._registry = registry
        self._registries: dict[str, Registry] = {}
        self._checkpoints: dict[str, Checkpoint | Exception] = {}
        self._checkpoint_lock = threading.Lock()  # one checkpoint per registry and run

    def _for(self, host: str) -> Registry:
        if host not in self._registries:
            self._registries[host] = self._registry(host)
        return self._registries[host]

    def verify(self, workdir: Path, lock: LockFile, readonly: bool) -> Report:
        installed = read_manifest(workdir)
        report = Report()
        modules: list[RegistryModule] = []
        for entry in installed:
            module = registry_module(entry)
            if module is None:
                report.unverifiable.append(f"{entry.key}: {_kind(entry)} source {entry.source}")
            else:
                modules.append(module)
        for module in modules:  # one Registry per host, made before the threads share it
            self._for(module.host)
        with ThreadPoolExecutor(THREADS) as pool:
            results = list(pool.map(lambda m: self._one(m, lock, readonly), modules))
        fresh = LockFile(checkpoints=dict(lock.checkpoints))
        for module, result in zip(modules, results, strict=True):
            label = f"{module.installed.key} ({module.installed.source} {module.installed.version})"
            if isinstance(result, NoAttestations) and module.installed.key in lock.modules:
                # Verified before: a registry that stops signing must not pass a locked module.
                report.failed.append(f"{label}: {result}, but {_lock_name()} has it verified")
            elif isinstance(result, NoAttestations):
                report.unverifiable.append(f"{label}: {result}")
            elif isinstance(result, Exception):
                report.failed.append(f"{label}: {result}")
            else:
                report.verified.append(f"{label}: {result.locked.dir_hash}")
                fresh.modules[module.installed.key] = result.locked
        for host, point in self._checkpoints.items():
            if isinstance(point, Checkpoint):
                root = base64.b64encode(point.root).decode()
                fresh.checkpoints[host] = LockedCheckpoint(point.origin, point.size, root)
        report.lock = fresh
        return report

    def _one(self, module: RegistryModule, lock: LockFile, readonly: bool) -> _Checked | Exception:
        try:
            return self._check(module, lock, readonly)
        except (Failed, RegistryError, NoAttestations) as exc:
            return exc
        except OSError as exc:  # the installed tree cannot be read
            return Failed(f"cannot read the installed module: {exc}")
        except (ValueError, LookupError, TypeError, AttributeError, RecursionError) as exc:
            # What a registry answered is not what the protocol says (JSON, tiles).
            return Failed(f"the registry's answer is malformed: {exc!r}"[:300])

    def _check(self, module: RegistryModule, lock: LockFile, readonly: bool) -> _Checked:
        installed = module.installed
        locked = lock.modules.get(installed.key)
        registry = self._for(module.host)
        envelope, index = registry.statement(module.address, installed.version)
        if readonly:
            if locked is None:
                raise Failed(f"not in {_lock_name()} (run `gitreg verify` without --readonly)")
            if (locked.source, locked.version) != (installed.source, installed.version):
                raise Failed(
                    f"{_lock_name()} has {locked.source} {locked.version}"
                    " (run `gitreg verify` without --readonly to accept the change)"
                )
        verifiers = {k: _verifier(raw) for k, raw in registry.keys().items()}
        try:
            payload, keyid = dsse.open_envelope(envelope, verifiers)
        except BadRequest as exc:
            raise Failed(f"statement: {exc}") from None
        statement = json.loads(payload)
        archive_sha256, dir_hash, subdir = _subjects(statement, module)
        # Above the version's own `//subdir` and one the caller's source adds.
        root = _install_root(installed.dir, f"{subdir}/{module.subdir}")
        files = tree_files(root)
        if hash1(files.items()) != dir_hash:
            raise Failed(self._first_difference(registry, module, archive_sha256, files))
        if locked is not None and locked.version == installed.version:
            # A version's statement never changes: another hash or key is another statement.
            if locked.dir_hash != dir_hash:
                raise Failed(f"dirHash {dir_hash} differs from {locked.dir_hash} in {_lock_name()}")
            if locked.keyid != keyid:
                raise Failed(f"signed by key {keyid}, {_lock_name()} recorded {locked.keyid}")
        self._prove(registry, lock, index, payload, dir_hash)
        return _Checked(module, Locked(installed.source, installed.version, dir_hash, keyid, index))

    def _first_difference(
        self, registry: Registry, module: RegistryModule, sha256: str, files: dict[str, str]
    ) -> str:
        data = registry.archive(module.address, module.installed.version)
        if hashlib.sha256(data).hexdigest() != sha256:
            return "the registry's archive does not match its own statement"
        try:
            published = archive_files(io.BytesIO(data))
        except (tarfile.TarError, zlib.error, EOFError) as exc:
            return f"the registry's archive cannot be read: {exc}"
        for name in sorted(set(published) | set(files), key=lambda n: n.encode()):
            if name not in files:
                return f"{name} is missing from the installed module"
            if name not in published:
                return f"{name} is not in the published version"
            if files[name] != published[name]:
                return f"{name} differs from the published version"
        return "the installed tree differs from the statement's dirHash"

    def _checkpoint(self, registry: Registry, lock: LockFile, covering: int = 0) -> Checkpoint:
        """The registry's checkpoint, consistent with the lock's: read once per
        run, and again when an entry published since (`covering`) is not in it."""
        with self._checkpoint_lock:
            found = self._checkpoints.get(registry.host)
            if found is None or (isinstance(found, Checkpoint) and found.size <= covering):
                try:
                    found = registry.checkpoint()
                    self._consistent(registry, lock.checkpoints.get(registry.host), found)
                except (RegistryError, Failed) as exc:
                    found = exc
                self._checkpoints[registry.host] = found
        if isinstance(found, Exception):
            raise found
        return found

    def _consistent(
        self, registry: Registry, before: LockedCheckpoint | None, now: Checkpoint
    ) -> None:
        if before is None:
            return
        old_root = base64.b64decode(before.root)
        if before.origin != now.origin:
            raise Failed(f"the log is {now.origin}, {_lock_name()} recorded {before.origin}")
        if before.size > now.size:
            raise Failed(f"the log shrank from {before.size} to {now.size} entries")
        if before.size == 0:
            return
        proof = []
        if before.size != now.size:
            proof = self._reader(registry, now).consistency_proof(before.size)
        if not verify_consistency(before.size, now.size, old_root, now.root, proof):
            raise Failed(
                f"the log's checkpoint of {now.size} entries is not consistent with the one"
                f" of {before.size} in {_lock_name()}: the log was rewritten"
            )

    def _reader(self, registry: Registry, point: Checkpoint) -> TreeReader:
        return TreeReader(point.size, registry.tile)

    def _prove(
        self, registry: Registry, lock: LockFile, index: int, payload: bytes, dir_hash: str
    ) -> None:
        point = self._checkpoint(registry, lock, covering=index)
        if not 0 <= index < point.size:
            raise Failed(f"log entry {index} is not in the log's {point.size} entries")
        tile, offset = divmod(index, TILE_WIDTH)
        width = min(TILE_WIDTH, point.size - tile * TILE_WIDTH)
        entries = registry.entries(tile, width)
        if len(entries) <= offset:
            raise Failed(f"log entry {index} is missing from its tile")
        entry = entries[offset]
        try:
            fields: dict[str, Any] = json.loads(entry)
        except ValueError:
            raise Failed(f"log entry {index} is not JSON") from None
        digest = hashlib.sha256(payload).hexdigest()
        if fields.get("event") != "publish" or fields.get("statement") != {"sha256": digest}:
            raise Failed(f"log entry {index} does not record this statement")
        if fields.get("dirHash") != dir_hash:
            raise Failed(f"log entry {index} records another dirHash")
        proof = self._reader(registry, point).inclusion_proof(index)
        if not verify_inclusion(index, point.size, leaf_hash(entry), proof, point.root):
            raise Failed(f"log entry {index} is not included in the signed checkpoint")


def _verifier(raw: bytes) -> Callable[[bytes, bytes], bool]:
    return lambda signature, message: verify_ed25519(raw, signature, message)


def _subjects(statement: Any, module: RegistryModule) -> tuple[str, str, str]:
    """(archive sha256, dirHash, subdirectory) of a statement about this module's version."""
    try:
        subjects = {s["name"]: s["digest"] for s in statement["subject"]}
        name = f"{module.address}/{module.installed.version}".lower()
        by_name = {k.lower(): v for k, v in subjects.items()}
        archive = by_name[name + ".tar.gz"]["sha256"]
        dir_hash = by_name[name]["dirHash"]
        params = statement["predicate"]["buildDefinition"]["externalParameters"]
        subdir = str(params.get("subdirectory", ""))
    except (KeyError, TypeError):
        raise Failed(
            f"the statement is not about {module.address} {module.installed.version}"
        ) from None
    return str(archive), str(dir_hash), subdir


def _install_root(directory: Path, subdir: str) -> Path:
    """Where Terraform extracted the archive: above the module's `//subdir`."""
    root = directory
    for _ in [p for p in subdir.strip("/").split("/") if p]:
        root = root.parent
    return root


def _kind(entry: Installed) -> str:
    source = entry.source
    if source.startswith(("./", "../", "/")) or source == ".":
        return "local"
    if source.startswith(("git::", "github.com/", "gitlab.com/")) or ".git" in source:
        return "git"
    return "non-registry"


def _lock_name() -> str:
    return "modules.lock.json"

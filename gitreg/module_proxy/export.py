"""Cached modules in `gitreg mirror export DIR`, and `gitreg modules import DIR`.

Terraform has no module mirror protocol (hashicorp/terraform#31134), so the
exported modules are for another gitreg inside the air gap, not for Terraform:

    DIR/modules/index.json                           every record, as cached
    DIR/modules/archives/SHA256.tar.gz               the archives, by content

`import_modules` verifies each archive against its recorded sha256 before it
stores anything, then adds the record; a version already cached there keeps
its own first bytes (pinned forever, docs/module-proxy.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitreg.canonical_json import json_bytes
from gitreg.errors import BadRequest, ConfigError
from gitreg.module_proxy.store import ModuleProxyIndex, ProxiedVersion
from gitreg.storage.blobs import BlobStore

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_FIELDS = {f.name for f in dataclasses.fields(ProxiedVersion)}


@dataclass
class ModuleTransfer:
    versions: int = 0
    archives: int = 0
    kept: int = 0  # import: versions already cached here, left as they were


def export_modules(store: ModuleProxyIndex, blobs: BlobStore, dest: Path) -> ModuleTransfer:
    records = store.versions()
    result = ModuleTransfer(versions=len(records))
    if not records:
        return result
    archives = dest / "modules" / "archives"
    archives.mkdir(parents=True, exist_ok=True)
    for sha in sorted({r.archive_sha256 for r in records}):
        target = archives / f"{sha}.tar.gz"
        if not target.is_file():
            temp = target.with_suffix(".tmp")
            with blobs.open(sha) as src, temp.open("wb") as out:
                while chunk := src.read(1024 * 1024):
                    out.write(chunk)
            os.replace(temp, target)
        result.archives += 1
    index = {"versions": [dataclasses.asdict(r) for r in records]}
    (dest / "modules" / "index.json").write_bytes(json_bytes(index))
    return result


def _record(entry: Any) -> ProxiedVersion:
    if not isinstance(entry, dict) or set(entry) != _FIELDS:
        raise BadRequest("modules/index.json: an entry does not have the expected fields")
    record = ProxiedVersion(**entry)
    if len(record.archive_sha256) != 64 or not set(record.archive_sha256) <= set(
        "0123456789abcdef"
    ):
        raise BadRequest(f"modules/index.json: bad sha256 for {record.module_key}")
    return record


def import_modules(store: ModuleProxyIndex, blobs: BlobStore, src: Path) -> ModuleTransfer:
    index_path = src / "modules" / "index.json"
    try:
        document = json.loads(index_path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {index_path}: {exc}", user_input=True) from exc
    entries = document.get("versions") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise BadRequest(f"{index_path}: no 'versions' list")
    records = [_record(e) for e in entries]
    result = ModuleTransfer()
    for record in records:
        if store.version(record.module_key, record.version) is not None:
            result.kept += 1
            continue
        _import_archive(blobs, src / "modules" / "archives", record.archive_sha256)
        result.archives += 1
        store.add_version(record)
        result.versions += 1
    return result


def _import_archive(blobs: BlobStore, archives: Path, sha256: str) -> None:
    path = archives / f"{sha256}.tar.gz"
    digest = hashlib.sha256()
    with path.open("rb") as src:
        while chunk := src.read(1024 * 1024):
            digest.update(chunk)
    if digest.hexdigest() != sha256:
        raise BadRequest(f"{path}: content does not match its sha256; nothing imported for it")
    with blobs.writer() as sink, path.open("rb") as src:
        while chunk := src.read(1024 * 1024):
            sink.write(chunk)

"""`Attestations`: what publishing, curation, the HTTP routes and the commands
ask of the attestations feature (docs/verify.md).

Publishing a version asks `for_publish` before its transaction, with the
`dirHash` its archive build computed: the statement is signed then, and the
returned block, around the call that records the version, attaches the
writes that store the envelope and append the log entry that binds it to
that transaction (gitreg/storage/attached.py). A yank or a deprecation asks
`for_change` the same way. So an event and its log entry commit together or
not at all.

A log entry is canonical JSON naming the event and the SHA-256 of the
statement it is about (a publish entry also the `dirHash` and archive digest);
it never names a module, so the public log shows nothing of a private
namespace to someone who does not hold the statement. The checkpoint is signed
when asked for, over the size and root the committed tiles give.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gitreg.addresses import ModuleAddress
from gitreg.archives.dirhash import archive_dirhash
from gitreg.attestations import dsse, note
from gitreg.attestations.keys import KeyRing, PublicKey
from gitreg.attestations.statement import LOCAL_BUILDER, Provenance, statement_bytes
from gitreg.attestations.store import AttestationIndex, AttestationRecord
from gitreg.attestations.tlog import TILE_WIDTH, TreeReader
from gitreg.audit.service import UNRECORDED, AuditLog
from gitreg.auth.service import Access, Credentials
from gitreg.canonical_json import json_bytes
from gitreg.errors import NotFound
from gitreg.settings import Settings
from gitreg.storage.attached import Attached, attach
from gitreg.storage.blobs import BlobStore
from gitreg.storage.index import utcnow
from gitreg.storage.protocols import ModuleIndex
from gitreg.storage.records import ModuleRecord, NewVersion, RepoRecord, VersionRecord
from gitreg.versions import parse_tag_version

log = logging.getLogger("gitreg.attestations")

# Around the call that performs the event: its log entry rides in that transaction.
Step = contextlib.AbstractContextManager[Attached]
Who = Callable[[], Credentials]
LOG_PATH = "/v1/attestations/log"
MAX_TILE_INDEX = 1 << 48  # far beyond any log, well inside the engines' 64-bit integers
VERIFY_COMMAND = "gitreg verify --readonly ."  # after `terraform init`, docs/verify.md


@dataclass(frozen=True)
class VersionProof:
    """What the browse API and the UI show of one version's statement."""

    archive_sha256: str
    dir_hash: str
    commit: str
    log_index: int
    keyid: str


# Versions read per query by `backfill`.
BACKFILL_PAGE = 500


class Attestations:
    def __init__(
        self,
        *,
        settings: Settings,
        store: AttestationIndex,
        keys: KeyRing,
        blobs: BlobStore,
        index: ModuleIndex,
        access: Access,
        on_change: Callable[[], None] = lambda: None,
        audit: AuditLog = UNRECORDED,
    ) -> None:
        self._audit = audit  # key rotations, by whom
        self._on_change = on_change  # the metadata cache, after a backfill
        self._settings = settings
        self._store = store
        self._keys = keys
        self._blobs = blobs
        self._index = index
        self._access = access

    # -- events ---------------------------------------------------------------------

    def for_publish(
        self,
        module: ModuleRecord,
        repo: RepoRecord,
        version: NewVersion,
        version_key: str,
        dir_hash: str = "",
        allowed_breaking: bool = False,
    ) -> Step:
        """Sign the statement of a version about to be recorded (`_statement`);
        the block stores it and logs the publish inside the transaction that
        records the version."""
        record, entry = self._statement(
            module, repo, version, version_key, "", dir_hash, allowed_breaking
        )
        return attach(lambda conn: self._store.record(conn, record, entry))

    def _statement(
        self,
        module: ModuleRecord,
        repo: RepoRecord,
        version: VersionRecord | NewVersion,
        version_key: str,
        published_at: str = "",
        dir_hash: str = "",
        allowed_breaking: bool = False,
    ) -> tuple[AttestationRecord, bytes]:
        """Sign the statement of a version, and make its log entry. `dir_hash` is
        the build's, when the archive was built now; otherwise that of another
        version with the same archive, or read from the archive.
        `allowed_breaking`: the semver guard refused this version and an
        operator let it publish (`gitreg modules allow-breaking`); the log
        entry says so, naming nobody (the audit log has who)."""
        dir_hash = dir_hash or self._store.dir_hash_of(version.archive_sha256)
        if not dir_hash:
            with self._blobs.open(version.archive_sha256) as archive:
                dir_hash = archive_dirhash(archive)
        provenance = Provenance(
            address=module.address,
            version=version.version,
            archive_sha256=version.archive_sha256,
            dir_hash=dir_hash,
            repository=repo.url,
            tag=version.tag,
            tag_sha=version.tag_sha,
            commit=version.commit_sha,
            subdir=module.subdir,
            tag_prefix=module.tag_prefix,
            archive_scope=module.archive_scope,
            builder=self._settings.public_url.rstrip("/") or LOCAL_BUILDER,
            published_at=_rfc3339(published_at or utcnow()),
        )
        payload = statement_bytes(provenance)
        key = self._keys.current()
        envelope = json_bytes(dsse.envelope(payload, key.public.keyid, key.sign)).decode()
        digest = hashlib.sha256(payload).hexdigest()
        fields: dict[str, object] = {
            "event": "publish",
            "statement": {"sha256": digest},
            "dirHash": dir_hash,
            "archive": {"sha256": version.archive_sha256},
            "keyid": key.public.keyid,
        }
        if allowed_breaking:
            fields["allowedBreaking"] = True
        entry = json_bytes(fields)
        record = AttestationRecord(
            module_id=module.id,
            version_key=version_key,
            archive_sha256=version.archive_sha256,
            envelope=envelope,
            statement_sha256=digest,
            dir_hash=dir_hash,
            keyid=key.public.keyid,
            log_index=-1,
            created_at=utcnow(),
        )
        return record, entry

    def for_change(self, module: ModuleRecord, version_key: str, event: str) -> Step:
        """The log entry of a yank, unyank, deprecation or undeprecation, as a
        block around the call that performs it: the entry names the version by
        its statement's hash, never by address, so the public log shows
        nothing of a private namespace."""
        found = self._store.attestation(module.id, version_key)
        entry = json_bytes(
            {
                "event": event,
                "statement": {"sha256": found.statement_sha256 if found else ""},
                "time": utcnow(),
            }
        )
        return attach(lambda conn: self._store.append(conn, entry))

    def rotate_key(self) -> PublicKey:
        """A new current key; the old ones stay listed, retired. Logged, and
        audited (the key may live in a file: the row has its own transaction)."""
        with self._audit.recording("attestation_key.rotate", "attestation key"):
            fresh = self._keys.rotate()
        retired = [k.keyid for k in self._keys.public_keys()[1:]]
        self._store.append_now(
            json_bytes(
                {
                    "event": "key-rotation",
                    "keyid": fresh.keyid,
                    "retired": retired,
                    "time": utcnow(),
                }
            )
        )
        return fresh

    def ensure_key(self) -> None:
        """Make the first key now (at start), so the first publish signs with it."""
        self._keys.ensure()

    def backfill(self, stop: threading.Event | None = None, once: bool = False) -> int:
        """Statements for the versions published before there were any, built
        from what was recorded then; how many were made. Idempotent. Read a
        page at a time, so memory stays flat over any number of versions; a
        set `stop` (the server shutting down) ends it between two versions.
        A version that cannot be signed (its archive gone) is reported in one
        line at the end. `once` (a server's start): nothing when a backfill
        already went over every version; `gitreg reindex` always goes over
        them, and so tries again what could not be signed."""
        if once and self._store.backfill_completed():
            return 0
        made, failed, first_failure = 0, 0, ""
        modules = {m.id: m for m in self._index.modules()}
        after = 0
        while page := self._store.unattested(after, BACKFILL_PAGE):
            after = page[-1].version_id
            for missing in page:
                if stop is not None and stop.is_set():
                    return self._backfilled(made, failed, first_failure)
                module = modules.get(missing.module_id)
                version = (
                    self._index.version_by_key(missing.module_id, missing.version_key)
                    if module is not None
                    else None
                )
                if module is None or version is None:
                    continue
                try:
                    repo = self._index.repo(module.repo_id)
                    record, entry = self._statement(
                        module, repo, version, missing.version_key, version.published_at
                    )
                    made += self._store.record_now(record, entry)
                except (OSError, NotFound) as exc:
                    failed += 1
                    first_failure = first_failure or f"{module.address} {version.version}: {exc}"
        self._store.complete_backfill()
        return self._backfilled(made, failed, first_failure)

    def _backfilled(self, made: int, failed: int, first_failure: str) -> int:
        if failed:
            log.warning("%d versions have no statement yet (the first: %s)", failed, first_failure)
        if made:
            self._on_change()
        return made

    # -- reading ----------------------------------------------------------------------

    async def envelope(self, who: Who, address: ModuleAddress, version: str) -> tuple[bytes, int]:
        """The DSSE envelope of a version and the index of its log entry, with
        the version's own access rules."""
        not_found = f"module {address} not found"
        await self._access.require_read(who(), address.namespace, not_found)
        return await asyncio.to_thread(self._envelope, address, version)

    def _envelope(self, address: ModuleAddress, version: str) -> tuple[bytes, int]:
        key = str(parse_tag_version(version).without_build())
        module = self._index.find_module(address.namespace, address.name, address.system)
        if module is None:
            raise NotFound(f"module {address} not found")
        found = self._store.attestation(module.id, key)
        if found is None:
            raise NotFound(f"module {module.address} has no statement for version {version}")
        return found.envelope.encode(), found.log_index

    def proof(self, module_id: int, version_key: str) -> VersionProof | None:
        """For the browse API and the UI (their callers check access)."""
        found = self._store.attestation(module_id, version_key)
        version = self._index.version_by_key(module_id, version_key)
        if found is None or version is None:
            return None
        return VersionProof(
            version.archive_sha256, found.dir_hash, version.commit_sha, found.log_index, found.keyid
        )

    def provenance(self, module_id: int, version_key: str) -> dict[str, Any] | None:
        """`proof` as the browse API's version record carries it."""
        found = self.proof(module_id, version_key)
        if found is None:
            return None
        return {
            "archive_sha256": found.archive_sha256,
            "dir_hash": found.dir_hash,
            "commit": found.commit,
            "log_index": found.log_index,
            "keyid": found.keyid,
            "verify_command": VERIFY_COMMAND,
        }

    def keys_document(self) -> dict[str, Any]:
        return {"keys": [k.listing() for k in self._keys.public_keys()]}

    def checkpoint(self, base: str) -> bytes:
        """The signed checkpoint of the log as committed now."""
        size = self._store.size()
        reader = TreeReader(size, self._read_tile)
        origin = log_origin(base)
        key = self._keys.current()
        point = note.Checkpoint(origin, size, reader.root())
        return note.sign(point, key.public.raw, key.sign)

    def tile(self, level: int, index: int, width: int) -> bytes:
        """A hash tile's bytes; NotFound for one the log does not have yet."""
        if index >= MAX_TILE_INDEX:
            raise NotFound("no such tile")
        data = self._store.hashes(level, index * TILE_WIDTH, width)
        if len(data) != width * 32:
            raise NotFound("no such tile")
        return data

    def entry_bundle(self, index: int, width: int) -> bytes:
        if index >= MAX_TILE_INDEX:
            raise NotFound("no such tile")
        entries = self._store.entries(index * TILE_WIDTH, width)
        if len(entries) != width:
            raise NotFound("no such tile")
        return b"".join(len(e).to_bytes(2, "big") + e for e in entries)

    def _read_tile(self, level: int, index: int, width: int) -> bytes:
        return self._store.hashes(level, index * TILE_WIDTH, width)


def log_origin(base: str) -> str:
    """The checkpoint origin: the log's URL without its scheme."""
    parts = urlsplit(base.rstrip("/") + LOG_PATH)
    return f"{parts.netloc}{parts.path}"


def _rfc3339(stamp: str) -> str:
    """A recorded time as RFC 3339 UTC (the index keeps ISO 8601 strings)."""
    text = stamp.replace(" ", "T")
    if text.endswith("+00:00"):
        text = text[: -len("+00:00")] + "Z"
    if not text.endswith("Z"):
        text += "Z"
    return text

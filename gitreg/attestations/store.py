"""What the attestations feature stores: each version's envelope and the log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gitreg.storage.database import Connection


@dataclass(frozen=True)
class AttestationRecord:
    module_id: int
    version_key: str
    archive_sha256: str
    envelope: str  # DSSE JSON, as served
    statement_sha256: str  # of the envelope's payload
    dir_hash: str
    keyid: str
    log_index: int
    created_at: str


@dataclass(frozen=True)
class Unattested:
    """A published version that has no statement yet (published before them)."""

    module_id: int
    version_key: str
    version_id: int  # the order they are found in, for the next page


class AttestationIndex(Protocol):
    def record(self, conn: Connection, record: AttestationRecord, entry: bytes) -> bool:
        """Inside the caller's write transaction: append `entry` to the log and
        keep the envelope under the log index it got (the record's own
        `log_index` is ignored); False, with nothing written, when the version
        already has a statement."""
        ...

    def record_now(self, record: AttestationRecord, entry: bytes) -> bool:
        """`record` in a transaction of its own."""
        ...

    def append(self, conn: Connection, entry: bytes) -> int:
        """Inside the caller's write transaction: append `entry`; its index."""
        ...

    def append_now(self, entry: bytes) -> int:
        """`append` in a transaction of its own."""
        ...

    def attestation(self, module_id: int, version_key: str) -> AttestationRecord | None: ...

    def unattested(self, after_id: int, limit: int) -> list[Unattested]:
        """Up to `limit` of them, in version id order, after the version `after_id`."""
        ...

    def backfill_completed(self) -> bool:
        """Whether a backfill has gone over every version once."""
        ...

    def complete_backfill(self) -> None: ...

    def dir_hash_of(self, archive_sha256: str) -> str:
        """The dirHash already recorded for an archive, or "" (the same bytes
        always have the same dirHash)."""
        ...

    def size(self) -> int:
        """How many entries the log holds (committed)."""
        ...

    def hashes(self, level: int, start: int, count: int) -> bytes:
        """Up to `count` stored hashes of tile level `level` from `start`, concatenated."""
        ...

    def entries(self, start: int, count: int) -> list[bytes]: ...

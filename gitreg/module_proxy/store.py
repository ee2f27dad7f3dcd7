"""What the module proxy needs from the index, and the records it hands out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ProxiedIndex:
    module_key: str  # host/namespace/name/system, lower-cased
    versions: tuple[str, ...]
    fetched_at: float


@dataclass(frozen=True)
class ProxiedVersion:
    module_key: str
    version: str
    host: str
    namespace: str
    name: str
    system: str
    location: str  # the upstream's X-Terraform-Get, as sent
    git_url: str
    ref: str
    subdir: str
    commit_sha: str
    archive_sha256: str
    archive_size: int
    fetched_at: float


@dataclass(frozen=True)
class ProxiedMove:
    module_key: str
    version: str
    ref: str
    cached_commit: str
    upstream_commit: str
    first_seen: float


class ModuleProxyIndex(Protocol):
    def index(self, module_key: str) -> ProxiedIndex | None: ...

    def save_index(self, module_key: str, versions: list[str], fetched_at: float) -> None: ...

    def version(self, module_key: str, version: str) -> ProxiedVersion | None: ...

    def versions(self, module_key: str | None = None) -> list[ProxiedVersion]: ...

    def add_version(self, record: ProxiedVersion) -> ProxiedVersion: ...

    def record_move(self, move: ProxiedMove) -> bool: ...

    def moves(self) -> list[ProxiedMove]: ...

    def blob_owners(self) -> list[tuple[str, str]]: ...

    def blob_referenced(self, sha256: str) -> bool:
        """Whether any row of the index names this blob (gitreg/storage/blob_refs.py)."""
        ...

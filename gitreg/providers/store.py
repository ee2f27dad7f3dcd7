"""What in-house providers need from the index, and the records it hands out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class ProviderRecord:
    id: int
    namespace: str
    type: str
    repo_id: int | None
    forge: str
    sign_releases: bool
    last_sync_at: str | None
    last_sync_report: str

    @property
    def address(self) -> str:
        return f"{self.namespace}/{self.type}"


@dataclass(frozen=True)
class KeyRecord:
    id: int
    namespace: str
    key_id: str
    fingerprint: str
    ascii_armor: str
    algorithms: tuple[str, ...]
    terraform_compatible: bool
    origin: str  # "registered" (publisher's public key) or "generated" (gitreg holds the secret)
    created_at: str
    retired_at: str | None


@dataclass(frozen=True)
class PackageRecord:
    os: str
    arch: str
    filename: str
    sha256: str
    size: int
    h1: str


@dataclass(frozen=True)
class ProviderVersionRecord:
    id: int
    provider_id: int
    version: str
    protocols: tuple[str, ...]
    shasums_filename: str
    shasums_sha256: str
    signature_sha256: str
    key_row: int
    signed_by: str  # "publisher" or "gitreg"
    source: str
    published_at: str
    yanked: bool  # hidden from version lists, still served by exact version


@dataclass(frozen=True)
class NewProviderVersion:
    provider_id: int
    version: str
    protocols: tuple[str, ...]
    shasums_filename: str
    shasums_sha256: str
    signature_sha256: str
    key_row: int
    signed_by: str
    source: str
    packages: list[PackageRecord] = field(default_factory=list)


class ProviderIndex(Protocol):
    """Hosted providers, their versions and packages, and signing keys."""

    def add_provider(
        self,
        namespace: str,
        type_: str,
        repo_id: int | None = None,
        forge: str = "",
        sign_releases: bool = False,
    ) -> ProviderRecord:
        """Get or create (idempotent); raises `Conflict` when another repository
        already feeds that address."""
        ...

    def find_provider(self, address_key: str) -> ProviderRecord | None: ...

    def provider(self, provider_id: int) -> ProviderRecord: ...

    def providers(self) -> list[ProviderRecord]: ...

    def providers_of_repo(self, repo_id: int) -> list[ProviderRecord]: ...

    def record_provider_sync(self, provider_id: int, report: list[str]) -> None: ...

    def add_key(
        self,
        namespace: str,
        key_id: str,
        fingerprint: str,
        ascii_armor: str,
        algorithms: tuple[str, ...],
        terraform_compatible: bool,
        origin: str,
    ) -> tuple[KeyRecord, bool]:
        """Register a key for a namespace; (record, False) when it was already
        there (idempotent)."""
        ...

    def keys(self, namespace: str | None = None, active_only: bool = False) -> list[KeyRecord]: ...

    def key(self, row_id: int) -> KeyRecord: ...

    def retire_key(self, namespace: str, key_id: str) -> KeyRecord:
        """Stop using a key for new versions; versions it signed keep serving it.
        Raises `NotFound` for a key the namespace does not have."""
        ...

    def key_use_count(self, row_id: int) -> int: ...

    def provider_version(self, provider_id: int, version: str) -> ProviderVersionRecord | None: ...

    def provider_versions(self, provider_id: int) -> list[ProviderVersionRecord]:
        """Every published version of a provider, yanked ones included."""
        ...

    def set_provider_yanked(self, provider_id: int, version: str, yanked: bool) -> None:
        """Hide a version from version lists (or show it again); its files keep
        serving by exact version. Raises `NotFound` for an unknown version."""
        ...

    def packages(self, version_row: int) -> list[PackageRecord]: ...

    def packages_by_version(self, provider_id: int) -> dict[int, list[PackageRecord]]: ...

    def publish_provider_version(self, new: NewProviderVersion) -> bool:
        """A version and all its packages in ONE transaction; False, changing
        nothing, when the version exists. Every blob is durable first."""
        ...

    def blob_owners(self) -> list[tuple[str, str]]:
        """(namespace, sha256) of every served provider file, for the access
        policy on private namespaces."""
        ...

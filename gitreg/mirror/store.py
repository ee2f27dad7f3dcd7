"""What the provider mirror needs from the index, and the records it hands out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CachedVersion:
    version: str
    protocols: tuple[str, ...]
    platforms: tuple[str, ...]


@dataclass(frozen=True)
class CachedIndex:
    provider_key: str
    hostname: str
    namespace: str
    type: str
    versions: tuple[CachedVersion, ...]
    fetched_at: float


@dataclass(frozen=True)
class MirrorPackage:
    provider_key: str
    version: str
    platform: str
    filename: str
    sha256: str
    size: int
    h1: str
    protocols: tuple[str, ...]
    key_id: str
    source_url: str
    fetched_at: float

    @property
    def zh(self) -> str:
        return f"zh:{self.sha256}"


class MirrorIndex(Protocol):
    """The provider network mirror's cache (provider-network-mirror-protocol.md)."""

    def index(self, provider_key: str) -> CachedIndex | None: ...

    def save_index(
        self,
        provider_key: str,
        hostname: str,
        namespace: str,
        type_: str,
        versions: list[CachedVersion],
        fetched_at: float,
    ) -> bool:
        """Record a good upstream answer; True when the version list changed."""
        ...

    def packages(self, provider_key: str, version: str | None = None) -> list[MirrorPackage]: ...

    def package(self, provider_key: str, version: str, platform: str) -> MirrorPackage | None: ...

    def cached_provider_keys(self) -> list[str]: ...

    def add_package(self, package: MirrorPackage) -> MirrorPackage:
        """Insert unless present; the row now stored: the older one wins, so a
        cached zip never changes under its name."""
        ...

    def blob_owners(self) -> list[tuple[str, str]]:
        """(lower-cased upstream namespace, zip sha256) of every cached package."""
        ...

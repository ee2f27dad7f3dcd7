"""Recording a checked provider version: blobs first, then its index rows.

Blobs are written durably before the one transaction that records the version
with its packages, so an index row never names a missing blob. A version
already published is never replaced or re-signed: the same packages are a
no-op, other bytes a 409.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gitreg.errors import ChecksumMismatch, Conflict
from gitreg.providers.collect import ReleaseFiles
from gitreg.providers.keys import KeyManager
from gitreg.providers.names import shasums_filename
from gitreg.providers.signing import sign_detached
from gitreg.providers.store import NewProviderVersion, PackageRecord, ProviderIndex, ProviderRecord
from gitreg.providers.verify import SignedChecksums
from gitreg.storage.blobs import BlobStore


@dataclass(frozen=True)
class Published:
    address: str
    version: str
    status: Literal["published", "unchanged"]
    platforms: tuple[str, ...]
    key_id: str
    signed_by: str

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.address,
            "version": self.version,
            "status": self.status,
            "platforms": list(self.platforms),
            "key_id": self.key_id,
            "signed_by": self.signed_by,
        }


@dataclass(frozen=True)
class CheckedVersion:
    """A version that passed every check in `verify`, ready to be stored."""

    version: str
    files: ReleaseFiles
    shasums: bytes
    packages: list[PackageRecord]
    protocols: tuple[str, ...]


def sign_checksums(keys: KeyManager, namespace: str, shasums: bytes) -> SignedChecksums:
    """gitreg's own signature over `shasums`, with the namespace's signing key."""
    key, secret = keys.signing_key(namespace)
    return SignedChecksums(key, sign_detached(secret, shasums), "gitreg")


def unchanged_or_conflict(
    store: ProviderIndex,
    provider: ProviderRecord,
    version_row: int,
    version: str,
    digests: dict[str, str],
) -> Published:
    """A republish of a stored version: a no-op with the same packages, else 409."""
    stored = {p.filename: p.sha256 for p in store.packages(version_row)}
    if stored != digests:
        changed = sorted(set(stored.items()) ^ set(digests.items()))
        raise Conflict(
            f"provider {provider.address} {version} is already published with other"
            f" packages ({', '.join(sorted({n for n, _ in changed})[:10])}); published"
            " versions are immutable: publish a new version"
        )
    existing = store.provider_version(provider.id, version)
    assert existing is not None
    key = store.key(existing.key_row)
    platforms = tuple(f"{p.os}_{p.arch}" for p in store.packages(version_row))
    return Published(
        provider.address, version, "unchanged", platforms, key.key_id, existing.signed_by
    )


def store_version(
    store: ProviderIndex,
    blobs: BlobStore,
    provider: ProviderRecord,
    checked: CheckedVersion,
    signed: SignedChecksums,
    source: str,
) -> Published:
    """Write the blobs, then record the version and its packages in one transaction."""
    for package in checked.packages:
        stored = _store_file(blobs, checked.files.zips[package.filename])
        if stored != package.sha256:
            raise ChecksumMismatch(f"{package.filename} changed while it was being stored")
    shasums_blob = blobs.put_bytes(checked.shasums)
    signature_blob = blobs.put_bytes(signed.signature)
    shasums = checked.files.shasums
    name = shasums.name if shasums else shasums_filename(provider.type, checked.version)
    inserted = store.publish_provider_version(
        NewProviderVersion(
            provider_id=provider.id,
            version=checked.version,
            protocols=checked.protocols,
            shasums_filename=name,
            shasums_sha256=shasums_blob.sha256,
            signature_sha256=signature_blob.sha256,
            key_row=signed.key.id,
            signed_by=signed.signed_by,
            source=source,
            packages=checked.packages,
        )
    )
    if not inserted:  # cannot happen under the provider lock, unless the lock is bypassed
        raise Conflict(f"provider {provider.address} {checked.version} was published concurrently")
    platforms = tuple(f"{p.os}_{p.arch}" for p in checked.packages)
    return Published(
        provider.address,
        checked.version,
        "published",
        platforms,
        signed.key.key_id,
        signed.signed_by,
    )


def _store_file(blobs: BlobStore, path: Path) -> str:
    with blobs.writer() as sink, path.open("rb") as source:
        while chunk := source.read(1024 * 1024):
            sink.write(chunk)
    assert sink.result is not None
    return sink.result.sha256

"""Checking a candidate provider version before anything is stored.

Each check reads only what it needs, under a byte cap: SHA256SUMS against the
packages given (TERRAFORM-CLIENT.md format, goreleaser's names), its signature
against the namespace's registered keys (spec provider-registry-protocol.md,
"signing_keys"), every package's sha256 against its line, every zip's layout
and h1 hash under limits, and the protocol versions from the
manifest (spec: "protocols"; 5.0 when there is none).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from gitreg.errors import ChecksumMismatch, IncompleteRelease, PublishError, SignatureError
from gitreg.providers.checksums import MAX_SHASUMS_BYTES, format_shasums, parse_shasums
from gitreg.providers.collect import MAX_MANIFEST_BYTES, ReleaseFiles
from gitreg.providers.keys import KeyManager
from gitreg.providers.names import FileKind, classify
from gitreg.providers.package import PackageLimits, inspect_package, sha256_file
from gitreg.providers.signing import MAX_SIGNATURE_BYTES, verify_detached
from gitreg.providers.store import KeyRecord, PackageRecord

DEFAULT_PROTOCOLS = ("5.0",)
_PROTOCOL = re.compile(r"^[0-9]{1,3}\.[0-9]{1,3}$")


@dataclass(frozen=True)
class SignedChecksums:
    """The detached signature a version's SHA256SUMS is published with, and by whom:
    "publisher" (verified against a registered key) or "gitreg" (signed here)."""

    key: KeyRecord
    signature: bytes
    signed_by: str


def listed_packages(files: ReleaseFiles, type_: str, version: str) -> dict[str, str]:
    """The packages a SHA256SUMS lists, by file name, with their sha256."""
    assert files.shasums is not None
    listed = parse_shasums(_read_capped(files.shasums, MAX_SHASUMS_BYTES, "SHA256SUMS"))
    return {n: d for n, d in listed.items() if classify(n, type_, version)[0] is FileKind.PACKAGE}


def checksums(
    type_: str, version: str, files: ReleaseFiles, sign: bool
) -> tuple[bytes, dict[str, str]]:
    """SHA256SUMS as published and its listing: the given file, which must list
    exactly the packages given, or, when gitreg signs, one made from them."""
    if files.signature is None and not sign:
        raise SignatureError(
            "SHA256SUMS is not signed: give goreleaser's *_SHA256SUMS.sig, or ask gitreg"
            " to sign with the namespace's key (--sign)"
        )
    if files.shasums is None:
        if files.signature is not None:
            raise PublishError("a SHA256SUMS.sig came without the SHA256SUMS it signs")
        listed = {name: sha256_file(path)[0] for name, path in files.zips.items()}
        return format_shasums(listed), listed
    shasums = _read_capped(files.shasums, MAX_SHASUMS_BYTES, "SHA256SUMS")
    listed = parse_shasums(shasums)
    packages = {name for name in listed if classify(name, type_, version)[0] is FileKind.PACKAGE}
    if not packages:
        raise PublishError(f"SHA256SUMS lists no terraform-provider-{type_}_{version}_OS_ARCH.zip")
    missing = sorted(packages - set(files.zips))
    if missing:
        raise IncompleteRelease(missing)
    unlisted = sorted(set(files.zips) - packages)
    if unlisted:
        raise ChecksumMismatch(f"not listed in SHA256SUMS: {', '.join(unlisted[:20])}")
    return shasums, listed


def publisher_signature(
    keys: KeyManager,
    namespace: str,
    shasums: bytes,
    files: ReleaseFiles,
    allow_unverifiable_keys: bool,
) -> SignedChecksums:
    """The publisher's signature over `shasums`, verified against the namespace's
    active keys; the key must be one Terraform 1.0.x can read unless allowed."""
    assert files.signature is not None
    signature = _read_capped(files.signature, MAX_SIGNATURE_BYTES, "SHA256SUMS.sig")
    active = keys.verification_keys(namespace)
    if not active:
        raise SignatureError(
            f"namespace {namespace!r} has no active (registered, not retired) signing keys;"
            f" register the publisher's public key with `gitreg key add {namespace} KEY.asc`"
        )
    verified = verify_detached(shasums, signature, [info for _, info in active], namespace)
    record = next(k for k, info in active if info.fingerprint == verified.signer.fingerprint)
    if not record.terraform_compatible and not allow_unverifiable_keys:
        raise SignatureError(
            f"SHA256SUMS is signed by key {record.key_id} ({', '.join(record.algorithms)}),"
            " which Terraform 1.0.x cannot verify; sign with an RSA key (or set"
            " allow_unverifiable_keys if every client is newer)"
        )
    return SignedChecksums(record, verified.signature, "publisher")


def package_digests(
    files: ReleaseFiles, listed: dict[str, str], limits: PackageLimits
) -> dict[str, str]:
    """Every package's sha256, each equal to its SHA256SUMS line."""
    digests: dict[str, str] = {}
    for name, path in sorted(files.zips.items()):
        size = path.stat().st_size
        if size > limits.max_package_bytes:
            raise PublishError(f"{name} is {size} bytes; the limit is {limits.max_package_bytes}")
        digest, _ = sha256_file(path)
        if digest != listed[name]:
            raise ChecksumMismatch(
                f"{name}: sha256 is {digest}, but SHA256SUMS says {listed[name]}"
            )
        digests[name] = digest
    return digests


def inspect_packages(
    type_: str, files: ReleaseFiles, digests: dict[str, str], limits: PackageLimits
) -> list[PackageRecord]:
    """Every zip's layout and hashes under limits, as the rows to record."""
    packages = []
    for name, path in sorted(files.zips.items()):
        os_, arch = files.platforms[name]
        try:
            info = inspect_package(path, type_, os_, limits)
        except PublishError as exc:
            raise type(exc)(f"{name}: {exc}") from exc
        if info.sha256 != digests[name]:
            raise ChecksumMismatch(f"{name} changed while it was being checked")
        packages.append(PackageRecord(os_, arch, name, info.sha256, info.size, info.h1))
    return packages


def protocols(files: ReleaseFiles, listed: dict[str, str]) -> tuple[str, ...]:
    """The plugin protocol versions from the manifest's `metadata.protocol_versions`,
    else 5.0; Terraform speaks 5.x and 6.x (spec: "protocols")."""
    if files.manifest is None:
        return DEFAULT_PROTOCOLS
    data = _read_capped(files.manifest, MAX_MANIFEST_BYTES, "manifest.json")
    expected = listed.get(files.manifest.name)
    if expected is not None:
        digest = sha256_file(files.manifest)[0]
        if digest != expected:
            raise ChecksumMismatch(f"{files.manifest.name}: sha256 differs from SHA256SUMS")
    try:
        manifest = json.loads(data)
        found = manifest["metadata"]["protocol_versions"]
    except (ValueError, KeyError, TypeError) as exc:
        raise PublishError(
            f"{files.manifest.name} must be JSON with metadata.protocol_versions"
        ) from exc
    if (
        not isinstance(found, list)
        or not found
        or not all(isinstance(p, str) and _PROTOCOL.match(p) for p in found)
    ):
        raise PublishError(f'{files.manifest.name}: protocol_versions must be a list like ["5.0"]')
    if not any(p.split(".")[0] in ("5", "6") for p in found):
        raise PublishError("protocol_versions must include 5.x or 6.x, which Terraform speaks")
    return tuple(found)


def _read_capped(path: Path, limit: int, what: str) -> bytes:
    with path.open("rb") as source:
        data = source.read(limit + 1)
    if len(data) > limit:
        raise PublishError(f"{what} is larger than {limit} bytes")
    return data

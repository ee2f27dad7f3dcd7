"""Verification of an upstream package before the mirror keeps it.

Terraform installs from a network mirror without any signature check of its
own (TERRAFORM-CLIENT.md, Network mirror), so the mirror does what the CLI
would have done against the origin registry, in this order:

1. the detached signature over SHA256SUMS verifies against one of the
   upstream's `signing_keys` (while the zip downloads; nothing is kept
   before it passed);
2. SHA256SUMS lists the package's `filename`, with the `shasum` the download
   metadata announced;
3. the downloaded bytes are a zip whose sha256 is that line's;
4. the zip unpacks within limits (zip bombs) and has the layout
   Terraform needs; this also yields its `h1:` hash.

The parsing, signature and zip functions are gitreg.providers', so
in-house and mirrored providers are held to one standard. Every refusal is a
`VerificationError` whose message names the reason. These functions block:
callers run them in a thread.
"""

from __future__ import annotations

from pathlib import Path

from gitreg.addresses import ProviderAddress
from gitreg.errors import BadRequest, PackageError, SignatureError, VerificationError
from gitreg.mirror.upstream import DownloadInfo
from gitreg.providers.checksums import parse_shasums
from gitreg.providers.package import PackageInfo, PackageLimits, inspect_package
from gitreg.providers.signing import PublicKeyInfo, parse_public_key, verify_detached
from gitreg.providers.zipstream import StreamedMembers

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def verify_checksums(
    address: ProviderAddress, download: DownloadInfo, shasums: bytes, signature: bytes
) -> tuple[str, str]:
    """Steps 1-2: (key ID of the signer, expected sha256 of the zip)."""
    keys: list[PublicKeyInfo] = []
    for armor in download.public_keys:
        try:
            keys.append(parse_public_key(armor.encode()))
        except BadRequest:
            continue  # one unreadable key does not spoil the others
    if not keys:
        raise VerificationError(f"{address}: none of the upstream's signing keys is readable")
    try:
        verified = verify_detached(
            shasums, signature, keys, f"{address.hostname}/{address.namespace}"
        )
    except SignatureError as exc:
        raise VerificationError(
            f"{address}: the SHA256SUMS signature does not verify against the upstream's"
            f" signing keys: {exc}"
        ) from exc
    try:
        entries = parse_shasums(shasums)
    except BadRequest as exc:
        raise VerificationError(f"{address}: unusable SHA256SUMS: {exc}") from exc
    listed = entries.get(download.filename)
    if listed is None:
        raise VerificationError(f"{address}: SHA256SUMS does not list {download.filename}")
    if listed != download.shasum:
        raise VerificationError(
            f"{address}: the download metadata's shasum for {download.filename} differs"
            " from its signed SHA256SUMS"
        )
    return verified.signer.key_id, listed


def verify_bytes(
    address: ProviderAddress,
    download: DownloadInfo,
    path: Path,
    sha256: str,
    expected: str,
    content_type: str,
) -> None:
    """Step 3 on the downloaded file, whose `sha256` the caller computed as the
    bytes arrived into a file only it writes (the blob writer's temp file)."""
    with path.open("rb") as head:
        magic = head.read(4)
    if magic not in _ZIP_MAGIC:
        shown = content_type or "no Content-Type"
        raise VerificationError(
            f"{address}: {download.filename} is not a zip archive (upstream sent {shown},"
            f" starting {magic!r}; an error page?)"
        )
    if sha256 != expected:
        raise VerificationError(
            f"{address}: {download.filename} has sha256 {sha256}, but the signed SHA256SUMS"
            f" says {expected}"
        )


def verify_layout(
    address: ProviderAddress,
    download: DownloadInfo,
    path: Path,
    sha256: str,
    limits: PackageLimits,
    streamed: StreamedMembers | None = None,
) -> PackageInfo:
    """Step 4 on the file `verify_bytes` passed: its central directory is read for
    the layout, and `h1:` comes from the member hashes `streamed` took as the
    bytes arrived when they match it exactly, else from unzipping the file once
    more. Returns its hashes."""
    os_ = download.platform.partition("_")[0]
    try:
        return inspect_package(path, address.type, os_, limits, sha256, streamed)
    except PackageError as exc:
        raise VerificationError(f"{address}: {download.filename} refused: {exc}") from exc

"""One validation and publish path for every way a provider version arrives.

Sources: a forge release (webhook job, periodic reconcile, `gitreg provider
sync`), an HTTP upload from CI, and `gitreg provider publish DIR`. Each hands
`ProviderPublisher.publish` a set of local files; it checks, in this order,
cheapest first:

1. the version is strict semver without `v`;
2. SHA256SUMS parses (TERRAFORM-CLIENT.md format) and lists exactly the
   packages given, by goreleaser's names;
3. the signature verifies against one of the namespace's active keys, which
   Terraform 1.0.x must be able to read (P1) - or, with `sign`, gitreg signs;
4. every package's sha256 matches its SHA256SUMS line (P1);
5. an existing version with the same packages is a no-op, with other bytes a
   409 (P2: published SHA256SUMS are never re-signed or replaced);
6. every zip's layout, and its h1 hash under limits (P4);
7. protocols come from the manifest's `metadata.protocol_versions`, else 5.0.

Then the blobs are written (durable first), and the version with its
packages is recorded in one transaction (S2), under a per-provider lock.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import httpx

from gitreg.errors import BadRequest, Conflict, GitregError, NotFound, PublishError
from gitreg.locks import file_lock
from gitreg.providers.checksums import MAX_SHASUMS_BYTES, format_shasums, parse_shasums
from gitreg.providers.forges import Asset, ForgeError, Release, ReleaseSource, release_source
from gitreg.providers.keys import KeyManager
from gitreg.providers.names import (
    FileKind,
    check_version,
    classify,
    shasums_filename,
)
from gitreg.providers.package import PackageLimits, inspect_package, sha256_file
from gitreg.providers.signing import (
    MAX_SIGNATURE_BYTES,
    SignatureError,
    sign_detached,
    verify_detached,
)
from gitreg.settings import Settings
from gitreg.storage.blobs import FileBlobStore
from gitreg.storage.providers import (
    KeyRecord,
    NewProviderVersion,
    PackageRecord,
    ProviderRecord,
    ProviderStore,
)
from gitreg.storage.records import RepoRecord
from gitreg.versions import NotAVersion, version_from_tag

log = logging.getLogger("gitreg.providers")

MAX_MANIFEST_BYTES = 64 * 1024
DEFAULT_PROTOCOLS = ("5.0",)
_PROTOCOL = re.compile(r"^[0-9]{1,3}\.[0-9]{1,3}$")
# A release still missing files this long after it was created is reported as
# failed rather than pending, so reconcile stops retrying it forever.
PENDING_WINDOW = timedelta(hours=24)


class ReleasePending(ForgeError):
    """A release exists but is not complete yet (goreleaser uploads assets one by
    one after publishing the release); the job is retried with backoff."""


class IncompleteRelease(PublishError):
    """SHA256SUMS lists packages that were not given."""

    def __init__(self, missing: list[str]) -> None:
        super().__init__(
            "SHA256SUMS lists packages that were not given: " + ", ".join(missing[:20])
        )
        self.missing = missing


class ChecksumMismatch(PublishError):
    """A package's sha256 differs from its SHA256SUMS line (P1)."""


@dataclass
class ReleaseFiles:
    """Local files of one release, sorted by what they are."""

    zips: dict[str, Path] = field(default_factory=dict)
    platforms: dict[str, tuple[str, str]] = field(default_factory=dict)
    shasums: Path | None = None
    signature: Path | None = None
    manifest: Path | None = None
    # A forge release of a version already published: only SHA256SUMS was
    # fetched, and its listing decides between no-op and conflict.
    listed_only: bool = False

    def add(self, path: Path, type_: str, version: str, strict: bool) -> None:
        kind, platform = classify(path.name, type_, version)
        if kind is FileKind.PACKAGE and platform is not None:
            self.zips[path.name] = path
            self.platforms[path.name] = platform
        elif kind is FileKind.SHASUMS:
            self._single("shasums", path)
        elif kind is FileKind.SIGNATURE:
            self._single("signature", path)
        elif kind is FileKind.MANIFEST:
            self._single("manifest", path)
        elif strict:
            raise BadRequest(
                f"{path.name[:120]!r} is not a file of terraform-provider-{type_} {version}:"
                " expected"
                f" terraform-provider-{type_}_{version}_OS_ARCH.zip, *_{version}_SHA256SUMS,"
                f" *_{version}_SHA256SUMS.sig or *_{version}_manifest.json"
            )

    def _single(self, attr: str, path: Path) -> None:
        current = getattr(self, attr)
        if current is not None and current.name != path.name:
            raise BadRequest(f"two {attr} files: {current.name} and {path.name}")
        setattr(self, attr, path)


def collect(paths: Iterable[Path], type_: str, version: str, strict: bool) -> ReleaseFiles:
    files = ReleaseFiles()
    for path in sorted(paths):
        files.add(path, type_, version, strict)
    return files


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


Status = Literal["published", "unchanged", "pending", "skipped", "conflict", "failed"]


@dataclass(frozen=True)
class ReleaseOutcome:
    provider: str
    tag: str
    status: Status
    message: str = ""

    def line(self) -> str:
        return f"{self.provider} {self.tag}: {self.status}" + (
            f": {self.message}" if self.message else ""
        )


@dataclass
class ProviderSyncResult:
    """What one sync of one repository's releases did; same fields as modules'
    `SyncResult` where they mean the same, for the job runner and the CLI."""

    repo_url: str
    outcomes: list[ReleaseOutcome] = field(default_factory=list)

    def _of(self, status: Status) -> list[str]:
        return [o.line() for o in self.outcomes if o.status == status]

    @property
    def published(self) -> list[str]:
        return self._of("published")

    @property
    def conflicts(self) -> list[str]:
        return self._of("conflict")

    @property
    def pending(self) -> list[str]:
        return self._of("pending")

    @property
    def failed(self) -> list[str]:
        return self._of("failed")

    def summary(self) -> str:
        parts = [f"{len(self.published)} provider versions published"]
        for name in ("pending", "conflicts", "failed"):
            count = len(getattr(self, name))
            if count:
                parts.append(f"{count} {name}")
        return f"{self.repo_url}: " + ", ".join(parts)


class ProviderPublisher:
    """Validates and publishes provider versions; blocking (call from a thread)."""

    def __init__(
        self,
        settings: Settings,
        store: ProviderStore,
        blobs: FileBlobStore,
        on_change: Callable[[], None] = lambda: None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.blobs = blobs
        self.keys = KeyManager(settings, store)
        self._on_change = on_change
        self._transport = transport
        self.limits = PackageLimits(
            max_package_bytes=settings.max_provider_package_bytes,
            max_unpacked_bytes=settings.max_provider_unpacked_bytes,
            max_files=settings.max_provider_files,
        )

    # -- the one publish path -----------------------------------------------

    def publish(
        self,
        provider: ProviderRecord,
        version: str,
        files: ReleaseFiles,
        *,
        sign: bool,
        source: str,
    ) -> Published:
        version = check_version(version)
        if files.listed_only and files.shasums is not None:
            listed = parse_shasums(_read_capped(files.shasums, MAX_SHASUMS_BYTES, "SHA256SUMS"))
            listed_packages = {
                n: d
                for n, d in listed.items()
                if classify(n, provider.type, version)[0] is FileKind.PACKAGE
            }
            existing = self.store.provider_version(provider.id, version)
            assert existing is not None
            return self._unchanged_or_conflict(provider, existing.id, version, listed_packages)
        if not files.zips:
            raise PublishError(
                f"no packages named terraform-provider-{provider.type}_{version}_OS_ARCH.zip"
            )
        shasums, listed = self._checksums(provider, version, files, sign)
        publisher_sig = (
            self._verify(provider.namespace, shasums, files) if files.signature else None
        )
        with file_lock(self.settings.data_dir / "locks" / f"provider-{provider.id}.lock"):
            digests = self._check_digests(files, listed)
            existing = self.store.provider_version(provider.id, version)
            if existing is not None:
                return self._unchanged_or_conflict(provider, existing.id, version, digests)
            packages = self._inspect(provider, files, digests)
            protocols = self._protocols(files, listed)
            if publisher_sig is not None:
                key, signature, signed_by = publisher_sig[0], publisher_sig[1], "publisher"
            else:
                key, signature = self._sign(provider.namespace, shasums)
                signed_by = "gitreg"
            record = self._store_version(
                provider,
                version,
                files,
                shasums,
                signature,
                key,
                signed_by,
                source,
                packages,
                protocols,
            )
        self._on_change()
        log.info(
            "published provider %s %s (%d platforms, %s-signed by %s) from %s",
            provider.address,
            version,
            len(packages),
            signed_by,
            key.key_id,
            source,
        )
        return record

    def _checksums(
        self, provider: ProviderRecord, version: str, files: ReleaseFiles, sign: bool
    ) -> tuple[bytes, dict[str, str]]:
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
        packages = {
            name for name in listed if classify(name, provider.type, version)[0] is FileKind.PACKAGE
        }
        if not packages:
            raise PublishError(
                f"SHA256SUMS lists no terraform-provider-{provider.type}_{version}_OS_ARCH.zip"
            )
        missing = sorted(packages - set(files.zips))
        if missing:
            raise IncompleteRelease(missing)
        unlisted = sorted(set(files.zips) - packages)
        if unlisted:
            raise ChecksumMismatch(f"not listed in SHA256SUMS: {', '.join(unlisted[:20])}")
        return shasums, listed

    def _verify(
        self, namespace: str, shasums: bytes, files: ReleaseFiles
    ) -> tuple[KeyRecord, bytes]:
        assert files.signature is not None
        signature = _read_capped(files.signature, MAX_SIGNATURE_BYTES, "SHA256SUMS.sig")
        keys = self.keys.verification_keys(namespace)
        if not keys:
            raise SignatureError(
                f"namespace {namespace!r} has no active (registered, not retired) signing keys;"
                f" register the publisher's public key with `gitreg key add {namespace} KEY.asc`"
            )
        verified = verify_detached(shasums, signature, [info for _, info in keys], namespace)
        record = next(k for k, info in keys if info.fingerprint == verified.signer.fingerprint)
        if not record.terraform_compatible and not self.settings.allow_unverifiable_keys:
            raise SignatureError(
                f"SHA256SUMS is signed by key {record.key_id} ({', '.join(record.algorithms)}),"
                " which Terraform 1.0.x cannot verify; sign with an RSA key (or set"
                " allow_unverifiable_keys if every client is newer)"
            )
        return record, verified.signature

    def _sign(self, namespace: str, shasums: bytes) -> tuple[KeyRecord, bytes]:
        key, secret = self.keys.signing_key(namespace)
        return key, sign_detached(secret, shasums)

    def _check_digests(self, files: ReleaseFiles, listed: dict[str, str]) -> dict[str, str]:
        digests: dict[str, str] = {}
        for name, path in sorted(files.zips.items()):
            size = path.stat().st_size
            if size > self.limits.max_package_bytes:
                raise PublishError(
                    f"{name} is {size} bytes; the limit is {self.limits.max_package_bytes}"
                )
            digest, _ = sha256_file(path)
            if digest != listed[name]:
                raise ChecksumMismatch(
                    f"{name}: sha256 is {digest}, but SHA256SUMS says {listed[name]}"
                )
            digests[name] = digest
        return digests

    def _unchanged_or_conflict(
        self, provider: ProviderRecord, version_row: int, version: str, digests: dict[str, str]
    ) -> Published:
        stored = {p.filename: p.sha256 for p in self.store.packages(version_row)}
        if stored != digests:
            changed = sorted(set(stored.items()) ^ set(digests.items()))
            raise Conflict(
                f"provider {provider.address} {version} is already published with other"
                f" packages ({', '.join(sorted({n for n, _ in changed})[:10])}); published"
                " versions are immutable: publish a new version"
            )
        existing = self.store.provider_version(provider.id, version)
        assert existing is not None
        key = self.store.key(existing.key_row)
        platforms = tuple(f"{p.os}_{p.arch}" for p in self.store.packages(version_row))
        return Published(
            provider.address, version, "unchanged", platforms, key.key_id, existing.signed_by
        )

    def _inspect(
        self, provider: ProviderRecord, files: ReleaseFiles, digests: dict[str, str]
    ) -> list[PackageRecord]:
        packages = []
        for name, path in sorted(files.zips.items()):
            os_, arch = files.platforms[name]
            try:
                info = inspect_package(path, provider.type, os_, self.limits)
            except PublishError as exc:
                raise type(exc)(f"{name}: {exc}") from exc
            if info.sha256 != digests[name]:
                raise ChecksumMismatch(f"{name} changed while it was being checked")
            packages.append(PackageRecord(os_, arch, name, info.sha256, info.size, info.h1))
        return packages

    def _protocols(self, files: ReleaseFiles, listed: dict[str, str]) -> tuple[str, ...]:
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
            protocols = manifest["metadata"]["protocol_versions"]
        except (ValueError, KeyError, TypeError) as exc:
            raise PublishError(
                f"{files.manifest.name} must be JSON with metadata.protocol_versions"
            ) from exc
        if (
            not isinstance(protocols, list)
            or not protocols
            or not all(isinstance(p, str) and _PROTOCOL.match(p) for p in protocols)
        ):
            raise PublishError(
                f'{files.manifest.name}: protocol_versions must be a list like ["5.0"]'
            )
        if not any(p.split(".")[0] in ("5", "6") for p in protocols):
            raise PublishError("protocol_versions must include 5.x or 6.x, which Terraform speaks")
        return tuple(protocols)

    def _store_version(
        self,
        provider: ProviderRecord,
        version: str,
        files: ReleaseFiles,
        shasums: bytes,
        signature: bytes,
        key: KeyRecord,
        signed_by: str,
        source: str,
        packages: list[PackageRecord],
        protocols: tuple[str, ...],
    ) -> Published:
        for package in packages:
            stored = self._store_file(files.zips[package.filename])
            if stored != package.sha256:
                raise ChecksumMismatch(f"{package.filename} changed while it was being stored")
        shasums_blob = self.blobs.put_bytes(shasums)
        signature_blob = self.blobs.put_bytes(signature)
        name = files.shasums.name if files.shasums else shasums_filename(provider.type, version)
        inserted = self.store.publish_provider_version(
            NewProviderVersion(
                provider_id=provider.id,
                version=version,
                protocols=protocols,
                shasums_filename=name,
                shasums_sha256=shasums_blob.sha256,
                signature_sha256=signature_blob.sha256,
                key_row=key.id,
                signed_by=signed_by,
                source=source,
                packages=packages,
            )
        )
        if not inserted:  # cannot happen under the provider lock, unless the lock is bypassed
            raise Conflict(f"provider {provider.address} {version} was published concurrently")
        platforms = tuple(f"{p.os}_{p.arch}" for p in packages)
        return Published(provider.address, version, "published", platforms, key.key_id, signed_by)

    def _store_file(self, path: Path) -> str:
        with self.blobs.writer() as sink, path.open("rb") as source:
            while chunk := source.read(1024 * 1024):
                sink.write(chunk)
        assert sink.result is not None
        return sink.result.sha256

    # -- forge releases -----------------------------------------------------

    def handles(self, repo: RepoRecord) -> bool:
        """Whether a repository feeds providers (so a job should read its releases)."""
        return bool(self.store.providers_of_repo(repo.id))

    def _source(self, provider: ProviderRecord, repo: RepoRecord) -> ReleaseSource:
        if not provider.forge:
            raise NotFound(
                f"provider {provider.address} has no forge; register it with"
                " `gitreg repo add URL --provider NS/TYPE --forge NAME`"
            )
        return release_source(self.settings, provider.forge, repo.forge_repo, self._transport)

    def ingest_release(self, repo: RepoRecord, tag: str) -> list[ReleaseOutcome]:
        """Publish the release of `tag` for each provider the repository feeds."""
        outcomes = []
        for provider in self.store.providers_of_repo(repo.id):
            source = self._source(provider, repo)
            try:
                outcomes.append(self._ingest_tag(provider, repo, source, tag, None))
            finally:
                source.close()
        return outcomes

    def sync_repo(self, repo: RepoRecord) -> ProviderSyncResult:
        """Publish every recent release not yet published (webhook jobs and reconcile).

        Raises ReleasePending (a GitError, so the job is retried with backoff)
        when a recent release is still missing files; the outcomes so far are
        recorded on the provider first."""
        result = ProviderSyncResult(repo.url)
        for provider in self.store.providers_of_repo(repo.id):
            source = self._source(provider, repo)
            try:
                published = {v.version for v in self.store.provider_versions(provider.id)}
                for release in source.releases():
                    try:
                        version = check_version(version_from_tag(release.tag).version)
                    except (NotAVersion, BadRequest):
                        continue
                    if version in published:
                        continue
                    result.outcomes.append(
                        self._ingest_tag(provider, repo, source, release.tag, release)
                    )
            finally:
                source.close()
            self.store.record_provider_sync(
                provider.id, [o.line() for o in result.outcomes if o.provider == provider.address]
            )
        log.info("provider sync %s", result.summary())
        if result.pending:
            raise ReleasePending("; ".join(result.pending))
        return result

    def _ingest_tag(
        self,
        provider: ProviderRecord,
        repo: RepoRecord,
        source: ReleaseSource,
        tag: str,
        release: Release | None,
    ) -> ReleaseOutcome:
        def outcome(status: Status, message: str = "") -> ReleaseOutcome:
            return ReleaseOutcome(provider.address, tag, status, message)

        try:
            version = check_version(version_from_tag(tag).version)
        except (NotAVersion, BadRequest) as exc:
            return outcome("skipped", f"not a version tag: {exc}")
        try:
            release = release or source.release(tag)
            if release is None:
                return outcome("pending", "no release for this tag yet")
            if release.draft:
                return outcome("pending", "the release is a draft")
            with tempfile.TemporaryDirectory(
                dir=self.blobs.root / "tmp", prefix="provider-release-"
            ) as tmp:
                found = self._download_release(provider, version, release, source, Path(tmp))
                if isinstance(found, str):
                    stale = _older_than(release.created_at, PENDING_WINDOW)
                    return outcome("failed" if stale else "pending", found)
                published = self.publish(
                    provider,
                    version,
                    found,
                    sign=provider.sign_releases and found.signature is None,
                    source=f"{provider.forge}:{repo.forge_repo}@{tag}",
                )
            return outcome(published.status)
        except Conflict as exc:
            log.warning("provider %s %s: %s", provider.address, tag, exc)
            return outcome("conflict", str(exc))
        except ForgeError:
            raise
        except GitregError as exc:
            log.warning("provider %s %s refused: %s", provider.address, tag, exc)
            return outcome("failed", str(exc))

    def _download_release(
        self,
        provider: ProviderRecord,
        version: str,
        release: Release,
        source: ReleaseSource,
        into: Path,
    ) -> ReleaseFiles | str:
        """The release's files downloaded into `into`, or why it is not complete yet.

        For a version already published only SHA256SUMS is needed: `publish`
        compares its listing with the stored packages (no-op or 409), so a
        replayed release costs one small download."""
        assets: dict[str, Asset] = {}
        by_kind: dict[FileKind, str] = {}
        for asset in release.assets:
            kind, _ = classify(asset.name, provider.type, version)
            if kind is FileKind.OTHER:
                continue
            if not asset.ready:
                return f"asset {asset.name} is still uploading"
            assets[asset.name] = asset
            if kind is not FileKind.PACKAGE:
                by_kind[kind] = asset.name
        if FileKind.SHASUMS not in by_kind:
            return f"waiting for the *_{version}_SHA256SUMS asset"
        if FileKind.SIGNATURE not in by_kind and not provider.sign_releases:
            return f"waiting for the *_{version}_SHA256SUMS.sig asset (or register with --sign)"
        sums = assets[by_kind[FileKind.SHASUMS]]
        with (into / sums.name).open("wb") as out:
            source.download(sums, out, MAX_SHASUMS_BYTES)
        listed = parse_shasums((into / sums.name).read_bytes())
        needed = {
            name
            for name in listed
            if classify(name, provider.type, version)[0] in (FileKind.PACKAGE, FileKind.MANIFEST)
        }
        missing = sorted(needed - set(assets))
        if missing:
            return f"waiting for assets listed in SHA256SUMS: {', '.join(missing[:10])}"
        if self.store.provider_version(provider.id, version) is not None:
            files = collect([into / sums.name], provider.type, version, strict=False)
            files.listed_only = True
            return files
        caps = {FileKind.SIGNATURE: MAX_SIGNATURE_BYTES, FileKind.MANIFEST: MAX_MANIFEST_BYTES}
        for name, asset in sorted(assets.items()):
            kind, _ = classify(name, provider.type, version)
            if name == sums.name or (kind is FileKind.PACKAGE and name not in listed):
                continue
            with (into / name).open("wb") as out:
                source.download(asset, out, caps.get(kind, self.limits.max_package_bytes))
        return collect(into.iterdir(), provider.type, version, strict=False)


def _older_than(stamp: str, age: timedelta) -> bool:
    try:
        created = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return False
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return datetime.now(UTC) - created > age


def _read_capped(path: Path, limit: int, what: str) -> bytes:
    with path.open("rb") as source:
        data = source.read(limit + 1)
    if len(data) > limit:
        raise PublishError(f"{what} is larger than {limit} bytes")
    return data

"""In-house providers as the outside sees them: what the `providers.v1` protocol,
CI uploads, the commands and the repository sync ask of the feature.

Every method is one operation: it validates its arguments, checks access where
a request asks, and reads or writes through the feature's own store, keys and
staging. Blocking methods are for the CLI and job threads; the `async` ones
are the HTTP requests' and run their blocking work on worker threads.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import anyio.to_thread

from gitreg.addresses import ProviderAddress, check_provider_namespace
from gitreg.audit.service import UNRECORDED, AuditLog
from gitreg.auth.service import Access, Credentials
from gitreg.auth.tokens import Scope
from gitreg.cache import MetadataCache
from gitreg.errors import BadRequest, GitError, NotFound, PayloadTooLarge, ReleasePending
from gitreg.providers.collect import collect
from gitreg.providers.downloads import ProviderDownloads, served_files, versions_document
from gitreg.providers.ingest import ProviderPublisher
from gitreg.providers.keys import KeyManager, Registered
from gitreg.providers.names import MAX_FILENAME, check_version
from gitreg.providers.outcomes import ProviderSyncResult, ReleaseOutcome
from gitreg.providers.record import (
    Published,
)
from gitreg.providers.store import (
    KeyRecord,
    PackageRecord,
    ProviderIndex,
    ProviderRecord,
    ProviderVersionRecord,
)
from gitreg.providers.uploads import UploadStaging
from gitreg.storage.records import RepoRecord
from gitreg.versions import sort_key

T = TypeVar("T")


class RepoLookup(Protocol):
    """Where a provider's repository record comes from."""

    def repo(self, repo_id: int) -> RepoRecord: ...


@dataclass(frozen=True)
class VersionSummary:
    version: ProviderVersionRecord
    key_id: str  # of the key that signed its SHA256SUMS
    packages: tuple[PackageRecord, ...]


@dataclass(frozen=True)
class ProviderSummary:
    provider: ProviderRecord
    repo: RepoRecord | None  # None for a provider fed by uploads only
    versions: tuple[VersionSummary, ...]  # oldest first, yanked ones included


@dataclass(frozen=True)
class KeyUse:
    key: KeyRecord
    versions_signed: int


@dataclass(frozen=True)
class GeneratedKey:
    key: KeyRecord
    secret_location: str  # where its secret is kept, for the operator's eyes


@dataclass(frozen=True)
class RepoSync:
    """What syncing one repository's releases did: its result, or why there is none."""

    url: str
    result: ProviderSyncResult | None = None
    pending: str = ""  # a recent release still misses files; the next sync retries it
    error: str = ""  # the forge or the repository failed


@dataclass(frozen=True)
class YankChange:
    address: str  # as registered
    version: str
    changed: bool  # False when the version already was in that state


class ProviderService:
    def __init__(
        self,
        *,
        store: ProviderIndex,
        publisher: ProviderPublisher,
        keys: KeyManager,
        staging: UploadStaging,
        cache: MetadataCache[object],
        access: Access,
        repos: RepoLookup,
        max_package_bytes: int,
        audit: AuditLog = UNRECORDED,
    ) -> None:
        self._audit = audit
        self._store = store
        self._publisher = publisher
        self._keys = keys
        self._staging = staging
        self._cache = cache
        self._access = access
        self._repos = repos
        self._max_package_bytes = max_package_bytes
        self._downloads = ProviderDownloads(store, cache, access)

    # -- listing ------------------------------------------------------------------

    def providers(self) -> list[ProviderSummary]:
        """Every hosted provider with its versions, packages and signing keys."""
        found = []
        for provider in self._store.providers():
            packages = self._store.packages_by_version(provider.id)
            versions = sorted(
                self._store.provider_versions(provider.id), key=lambda v: sort_key(v.version)
            )
            repo = self._repos.repo(provider.repo_id) if provider.repo_id is not None else None
            summaries = tuple(
                VersionSummary(v, self._store.key(v.key_row).key_id, tuple(packages.get(v.id, [])))
                for v in versions
            )
            found.append(ProviderSummary(provider, repo, summaries))
        return found

    def active_keys(self) -> list[KeyRecord]:
        """Every namespace's signing keys that are not retired."""
        return self._store.keys(active_only=True)

    def providers_of_repo(self, repo_id: int) -> list[ProviderRecord]:
        """The providers a repository's forge releases feed."""
        return self._store.providers_of_repo(repo_id)

    def _registered(self, address: ProviderAddress) -> ProviderRecord:
        found = self._store.find_provider(address.key)
        if found is None:
            raise NotFound(f"provider {address} is not registered")
        return found

    # -- publishing and forge releases -----------------------------------------------

    def publish_files(
        self, address: ProviderAddress, version: str, paths: list[Path], *, sign: bool
    ) -> Published:
        """Publish a goreleaser dist/ directory's files (zips alone are enough with
        `sign`; other files are ignored), registering the provider on first use.
        The publish path decides the rest (gitreg/providers/ingest.py)."""
        version = check_version(version)
        files = collect(paths, address.type, version, strict=False)
        provider = self._store.add_provider(address.namespace, address.type)
        return self._publisher.publish(provider, version, files, sign=sign, source="cli")

    def _repo_ids(self, address: ProviderAddress | None) -> list[int]:
        providers = [self._registered(address)] if address else self._store.providers()
        return sorted({p.repo_id for p in providers if p.repo_id is not None})

    def sync_releases(self, address: ProviderAddress | None = None) -> Iterator[RepoSync]:
        """Publish the forge releases not yet published, of every repository or of
        the one feeding `address`: one RepoSync per repository, as each ends.
        NotFound, before any work, for an unregistered address."""
        repo_ids = self._repo_ids(address)
        return self._sync_each(repo_ids)

    def _sync_each(self, repo_ids: list[int]) -> Iterator[RepoSync]:
        for repo_id in repo_ids:
            repo = self._repos.repo(repo_id)
            try:
                yield RepoSync(repo.url, result=self._publisher.sync_repo(repo))
            except ReleasePending as exc:
                yield RepoSync(repo.url, pending=str(exc))
            except GitError as exc:
                yield RepoSync(repo.url, error=str(exc))

    def ingest_tag(self, address: ProviderAddress | None, tag: str) -> Iterator[ReleaseOutcome]:
        """Publish the release of `tag` for every provider (or the one at
        `address`); NotFound, before any work, for an unregistered address."""
        repo_ids = self._repo_ids(address)
        return (
            outcome
            for repo_id in repo_ids
            for outcome in self._publisher.ingest_release(self._repos.repo(repo_id), tag)
        )

    def handles(self, repo: RepoRecord) -> bool:
        """Whether a repository feeds providers (so a sync reads its releases)."""
        return self._publisher.handles(repo)

    def sync_repo(self, repo: RepoRecord) -> ProviderSyncResult:
        """Publish a repository's recent releases not yet published; ReleasePending
        (a GitError, retried with backoff) when one still misses files."""
        return self._publisher.sync_repo(repo)

    # -- yanking ----------------------------------------------------------------------

    def set_yanked(self, address: ProviderAddress, version: str, yanked: bool) -> YankChange:
        """Hide a version from version lists (or list it again); its files keep
        serving by exact version. NotFound for an unknown provider or version."""
        version = check_version(version)
        provider = self._registered(address)
        found = self._store.provider_version(provider.id, version)
        if found is None:
            raise NotFound(f"provider {provider.address} has no version {version}")
        changed = found.yanked != yanked
        if changed:
            action = "provider.yank" if yanked else "provider.unyank"
            with self._audit.recording(action, f"{provider.address} {version}"):
                self._store.set_provider_yanked(provider.id, version, yanked)
            self._cache.invalidate()
        return YankChange(provider.address, version, changed)

    # -- keys -------------------------------------------------------------------------

    def register_key(self, namespace: str, public_key: bytes) -> Registered:
        """Register a publisher's public key (idempotent), with warnings when
        Terraform 1.0.x cannot verify its signatures."""
        namespace = check_provider_namespace(namespace)
        with self._audit.recording("key.add", namespace):
            return self._keys.add(namespace, public_key)

    def generate_key(self, namespace: str, algorithm: str) -> GeneratedKey:
        """A new key gitreg signs the namespace's SHA256SUMS with; BadRequest for
        an algorithm Terraform 1.0.x cannot verify or gitreg does not know."""
        namespace = check_provider_namespace(namespace)
        with self._audit.recording("key.generate", namespace, detail=algorithm):
            key = self._keys.generate(namespace, algorithm)
        return GeneratedKey(key, self._keys.secret_location(key))

    def retire_key(self, namespace: str, key_id: str) -> KeyUse:
        """Stop a key signing or verifying new versions; those it signed keep
        serving it. NotFound for a key the namespace does not have."""
        namespace = check_provider_namespace(namespace)
        with self._audit.recording("key.retire", f"{namespace} {key_id}"):
            key = self._keys.retire(namespace, key_id)
        return KeyUse(key, self._store.key_use_count(key.id))

    def export_key(self, namespace: str, key_id: str | None = None) -> str:
        """The ASCII-armored public key of `key_id` (a key ID or fingerprint), or
        the namespace's newest; NotFound when it has no such key."""
        keys = self._store.keys(check_provider_namespace(namespace))
        if key_id:
            keys = [k for k in keys if key_id.upper() in (k.key_id, k.fingerprint)]
        if not keys:
            raise NotFound(f"namespace {namespace} has no such key")
        return keys[-1].ascii_armor

    def keys(self, namespace: str | None = None) -> list[KeyUse]:
        """Every key (of one namespace, if given), retired ones included."""
        checked = check_provider_namespace(namespace) if namespace else None
        return [KeyUse(k, self._store.key_use_count(k.id)) for k in self._store.keys(checked)]

    # -- the providers.v1 protocol ----------------------------------------------------

    async def versions(
        self, who: Credentials, address: ProviderAddress, encode: Callable[[dict[str, Any]], T]
    ) -> T:
        """The `versions` answer, as `encode` makes it from the document; made once
        per change and kept in the metadata cache. 401/NotFound as the namespace's
        privacy decides, NotFound for a provider not hosted here."""
        not_found = f"provider {address} not found"
        await self._access.require_read(who, address.namespace, not_found)

        def build() -> T | None:
            document = versions_document(self._store, address)
            return None if document is None else encode(document)

        body = await self._cache.get(("provider-versions", address.key), build)
        if body is None:
            raise NotFound(not_found)
        return cast(T, body)

    async def download(
        self,
        who: Credentials,
        namespace: str,
        type_: str,
        version: str,
        os_: str,
        arch: str,
        base: str,
    ) -> bytes:
        """The download answer for the path values as sent, its URLs under `base`
        (signed for a private namespace): gitreg/providers/downloads.py."""
        return await self._downloads.answer(
            namespace, type_, version, os_, arch, base, lambda: self._access.principal(who)
        )

    async def file(self, address: ProviderAddress, version: str, filename: str) -> str:
        """The blob sha256 of one served file of a version; NotFound for any other
        name. Who may read it is the blob's access decision (gitreg/api/blobs.py)."""
        files = await self._cache.get(
            ("provider-files", address.key, version),
            lambda: served_files(self._store, address, version),
        )
        assert isinstance(files, dict)
        sha256 = files.get(filename)
        if sha256 is None:
            raise NotFound(f"provider {address} {version} has no file {filename[:120]!r}")
        return str(sha256)

    # -- CI uploads -------------------------------------------------------------------

    async def create_upload(self, who: Credentials, address: ProviderAddress, version: str) -> str:
        """A new upload for one provider version, for a publish token of its
        namespace; returns its id."""
        principal = await self._access.require(who, Scope.publish, address.namespace)
        return await anyio.to_thread.run_sync(
            self._staging.create, address, version, principal.token_id
        )

    async def receive_file(
        self,
        who: Credentials,
        address: ProviderAddress,
        version: str,
        upload_id: str,
        filename: str,
        declared: int | None,
        chunks: AsyncIterable[bytes],
    ) -> int:
        """Stage one file of an upload from `chunks`; returns its size.

        Refused before a byte is read for a name the version cannot have, or a
        `declared` length over the file's cap or the staging quotas; cut off
        while streaming at either limit, so a client that lies about its length
        stages no more. The quotas are checked and reserved in one transaction
        of the shared index, so replicas cannot each take the same room. A file
        cut off leaves nothing and releases its bytes."""
        await self._access.require(who, Scope.publish, address.namespace)
        if len(filename) > MAX_FILENAME:
            raise BadRequest("file name too long")
        staging = self._staging
        upload = await anyio.to_thread.run_sync(staging.open, upload_id, address, version)
        cap = await anyio.to_thread.run_sync(
            staging.check_file, upload, filename, address.type, version, self._max_package_bytes
        )
        if declared is not None and declared > cap:
            raise PayloadTooLarge(f"{filename} is over the {cap}-byte limit")
        # The declared bytes are reserved in the index before a byte is read, and
        # more as they arrive, so a client that lies is cut off at the quota.
        reservation = await anyio.to_thread.run_sync(
            staging.reserve, upload, filename, declared or 0, cap
        )
        incoming = None
        size = 0
        try:
            incoming = await anyio.to_thread.run_sync(staging.receive, upload, filename)
            async for chunk in chunks:
                size += len(chunk)
                if size > cap:
                    raise PayloadTooLarge(f"{filename} is over the {cap}-byte limit")
                await anyio.to_thread.run_sync(staging.write, incoming, reservation, chunk, size)
        except BaseException:
            with anyio.CancelScope(shield=True):  # a client gone still releases its bytes
                await anyio.to_thread.run_sync(staging.abort, incoming, reservation)
            raise
        await anyio.to_thread.run_sync(staging.commit, incoming, reservation, size)
        return size

    async def publish_upload(
        self,
        who: Credentials,
        address: ProviderAddress,
        version: str,
        upload_id: str,
        sign: Callable[[], Awaitable[bool]],
    ) -> Published:
        """Publish an upload's files through the one publish path and remove the
        upload, published or refused. `sign` is asked only once the publish
        token is accepted."""
        await self._access.require(who, Scope.publish, address.namespace)
        signed = await sign()
        return await anyio.to_thread.run_sync(
            self._publish_upload, address, version, upload_id, signed
        )

    def _publish_upload(
        self, address: ProviderAddress, version: str, upload_id: str, sign: bool
    ) -> Published:
        upload = self._staging.open(upload_id, address, version)
        try:
            # Local paths: the upload's own directory, or a scratch copy of its
            # files when they live in S3.
            with self._staging.local_files(upload) as paths:
                files = collect(paths, address.type, version, strict=True)
                provider = self._store.add_provider(address.namespace, address.type)
                with self._audit.recording("provider.publish", f"{address} {version}"):
                    return self._publisher.publish(
                        provider, version, files, sign=sign, source="upload"
                    )
        finally:
            self._staging.remove(upload)

    def remove_stale_uploads(self) -> int:
        """Remove uploads idle for `staging_ttl`; returns how many. Blocking."""
        return self._staging.remove_expired()

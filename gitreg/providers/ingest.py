"""One validation and publish path for every way a provider version arrives.

Sources: a forge release (webhook job, periodic reconcile, `gitreg provider
sync`), an HTTP upload from CI, and `gitreg provider publish DIR`. Each hands
`ProviderPublisher.publish` a set of local files (`collect`); it checks
(`verify`), in this order, cheapest first:

1. the version is strict semver without `v`;
2. SHA256SUMS parses (TERRAFORM-CLIENT.md format) and lists exactly the
   packages given, by goreleaser's names;
3. the signature verifies against one of the namespace's active keys, which
   Terraform 1.0.x must be able to read - or, with `sign`, gitreg signs;
4. every package's sha256 matches its SHA256SUMS line;
5. an existing version with the same packages is a no-op, with other bytes a
   409 (published SHA256SUMS are never re-signed or replaced);
6. every zip's layout, and its h1 hash under limits;
7. protocols come from the manifest's `metadata.protocol_versions`, else 5.0.

Then (`record`) the blobs are written (durable first), and the version with its
packages is recorded in one transaction, under a per-provider lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from gitreg.catalog.provider_docs import ProviderDocumenter
from gitreg.errors import (
    BadRequest,
    Conflict,
    ForgeError,
    GitregError,
    NotAVersion,
    NotFound,
    PublishError,
    ReleasePending,
)
from gitreg.locks import file_lock
from gitreg.metrics import service as metrics
from gitreg.providers import verify
from gitreg.providers.collect import ReleaseFiles, download_release
from gitreg.providers.forges import Release, ReleaseSource, release_source
from gitreg.providers.keys import KeyManager
from gitreg.providers.names import check_version
from gitreg.providers.outcomes import ProviderSyncResult, ReleaseOutcome, Status
from gitreg.providers.package import PackageLimits
from gitreg.providers.record import (
    CheckedVersion,
    Published,
    sign_checksums,
    store_version,
    unchanged_or_conflict,
)
from gitreg.providers.store import ProviderIndex, ProviderRecord
from gitreg.settings import Settings
from gitreg.storage.blobs import BlobStore
from gitreg.storage.records import RepoRecord
from gitreg.storage.secrets import file_secret_store
from gitreg.versions import version_from_tag

log = logging.getLogger("gitreg.providers")

# A release still missing files this long after it was created is reported as
# failed rather than pending, so reconcile stops retrying it forever.
PENDING_WINDOW = timedelta(hours=24)


class ProviderPublisher:
    """Validates and publishes provider versions; blocking (call from a thread)."""

    def __init__(
        self,
        settings: Settings,
        store: ProviderIndex,
        blobs: BlobStore,
        on_change: Callable[[], None] = lambda: None,
        transport: httpx.BaseTransport | None = None,
        keys: KeyManager | None = None,
        documenter: ProviderDocumenter | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.blobs = blobs
        # Without keys given (tests, tools), the secret files under the data dir.
        self.keys = keys or KeyManager(settings, store, file_secret_store(settings.data_dir))
        self._on_change = on_change
        self._transport = transport
        # Reads a forge release's docs/ pages once it is published; None reads none.
        self.documenter = documenter
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
            listed = verify.listed_packages(files, provider.type, version)
            existing = self.store.provider_version(provider.id, version)
            assert existing is not None
            return unchanged_or_conflict(self.store, provider, existing.id, version, listed)
        if not files.zips:
            raise PublishError(
                f"no packages named terraform-provider-{provider.type}_{version}_OS_ARCH.zip"
            )
        shasums, listed = verify.checksums(provider.type, version, files, sign)
        publisher_sig = (
            verify.publisher_signature(
                self.keys,
                provider.namespace,
                shasums,
                files,
                self.settings.allow_unverifiable_keys,
            )
            if files.signature
            else None
        )
        with file_lock(self.settings.data_dir / "locks" / f"provider-{provider.id}.lock"):
            digests = verify.package_digests(files, listed, self.limits)
            existing = self.store.provider_version(provider.id, version)
            if existing is not None:
                return unchanged_or_conflict(self.store, provider, existing.id, version, digests)
            checked = CheckedVersion(
                version,
                files,
                shasums,
                verify.inspect_packages(provider.type, files, digests, self.limits),
                verify.protocols(files, listed),
            )
            signed = publisher_sig or sign_checksums(self.keys, provider.namespace, shasums)
            record = store_version(self.store, self.blobs, provider, checked, signed, source)
        self._on_change()
        log.info(
            "published provider %s %s (%d platforms, %s-signed by %s) from %s",
            provider.address,
            version,
            len(checked.packages),
            signed.signed_by,
            signed.key.key_id,
            source,
        )
        metrics.published("provider", str(provider.address))
        return record

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
            with self.blobs.scratch_dir("provider-release-") as tmp:
                found = download_release(
                    self.store,
                    provider,
                    version,
                    release,
                    source,
                    tmp,
                    self.limits.max_package_bytes,
                )
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
            if published.status == "published":
                self._document(provider, repo, version, tag)
            return outcome(published.status)
        except Conflict as exc:
            log.warning("provider %s %s: %s", provider.address, tag, exc)
            return outcome("conflict", str(exc))
        except ForgeError:
            raise
        except GitregError as exc:
            log.warning("provider %s %s refused: %s", provider.address, tag, exc)
            return outcome("failed", str(exc))

    def _document(self, provider: ProviderRecord, repo: RepoRecord, version: str, tag: str) -> None:
        found = self.store.provider_version(provider.id, version)
        if self.documenter is not None and found is not None:
            self.documenter.document(provider, repo, found, tag)


def _older_than(stamp: str, age: timedelta) -> bool:
    try:
        created = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return False
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return datetime.now(UTC) - created > age

"""The resources one gitreg process works with, built once from `Settings`.

The app factory and the CLI both build a `Services`; handlers reach it through
the typed `gitreg.api.services.services(request)` accessor instead of untyped
`request.state`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitreg.attestations.keys import KeyRing
from gitreg.attestations.service import Attestations
from gitreg.attestations.store_sql import AttestationStore
from gitreg.audit.service import AuditLog
from gitreg.audit.store import AuditIndex
from gitreg.audit.store_sql import AuditStore
from gitreg.auth.login import LoginFlow
from gitreg.auth.oidc import OidcClient
from gitreg.auth.pending import SignInLimits
from gitreg.auth.service import Access, Namespaces
from gitreg.auth.signed_urls import UrlSigner
from gitreg.auth.store import AuthIndex
from gitreg.auth.store_sql import AuthStore
from gitreg.auth.tokens import Tokens
from gitreg.auth.web_sign_in import WebSignIn
from gitreg.cache import MetadataCache
from gitreg.catalog.documenter import Documenter
from gitreg.catalog.provider_docs import ProviderDocumenter
from gitreg.catalog.reindex import Reindexer
from gitreg.catalog.search_cache import SearchCache
from gitreg.catalog.service import Catalog
from gitreg.catalog.store import CatalogIndex, ProviderDocsIndex
from gitreg.catalog.store_sql import CatalogStore
from gitreg.catalog.store_sql_provider_docs import ProviderDocsStore
from gitreg.git.backend import DulwichBackend
from gitreg.jobs.queue import JobQueue
from gitreg.jobs.runner import JobRunner
from gitreg.jobs.service import Jobs
from gitreg.jobs.store import JobIndex
from gitreg.jobs.store_sql import JobStore
from gitreg.mirror.service import MirrorService, build_mirror
from gitreg.mirror.store import MirrorIndex
from gitreg.mirror.store_sql import MirrorStore
from gitreg.module_proxy.options import proxy_options
from gitreg.module_proxy.service import ModuleProxyService
from gitreg.module_proxy.store import ModuleProxyIndex
from gitreg.module_proxy.store_sql import ModuleProxyStore
from gitreg.modules.publisher import Publisher
from gitreg.modules.service import Modules
from gitreg.oci.service import Oci
from gitreg.oci.store import OciIndex
from gitreg.oci.store_sql import OciStore
from gitreg.providers.ingest import ProviderPublisher
from gitreg.providers.keys import KeyManager
from gitreg.providers.service import ProviderService
from gitreg.providers.store import ProviderIndex
from gitreg.providers.store_sql import ProviderStore
from gitreg.providers.uploads import UploadStaging
from gitreg.repositories.service import Repositories
from gitreg.repositories.store import RegistrationIndex
from gitreg.repositories.store_sql import RegistrationStore
from gitreg.repositories.sync import SyncService
from gitreg.semver_guard.service import SemverGuard
from gitreg.semver_guard.store import SemverIndex
from gitreg.semver_guard.store_sql import SemverStore
from gitreg.settings import Settings
from gitreg.storage.blobs import BlobStore
from gitreg.storage.health import Health
from gitreg.storage.index import Index, open_index
from gitreg.storage.protocols import ModuleIndex, SecretStore
from gitreg.storage.records import RepoRecord
from gitreg.storage.secrets import open_secret_store
from gitreg.storage.select import open_blob_store, open_upload_store
from gitreg.storage.service import Storage
from gitreg.storage.staged_bytes import StagedBytesIndex, StagedBytesStore
from gitreg.storage.staging import UploadStore
from gitreg.usage.counter import DownloadCounter
from gitreg.usage.service import DownloadUsage
from gitreg.usage.store import DownloadCountIndex
from gitreg.usage.store_sql import DownloadCountStore
from gitreg.workload_identity.service import WorkloadIdentity


@dataclass(frozen=True, kw_only=True)
class Services:
    """Everything one gitreg process works with, built once by `build_services`.

    Handlers, pages and commands call the feature services; the storage fields
    below them are for the assembly, the job runner and tests
    (tests/test_architecture.py keeps handlers away from them)."""

    settings: Settings
    cache: MetadataCache[object]  # pre-serialised answers, invalidated on publish
    # Features.
    access: Access  # who may read and publish what
    tokens: Tokens
    namespaces: Namespaces
    login: LoginFlow  # `terraform login` (login.v1)
    sign_in: WebSignIn  # the web UI's sign-in and its sessions
    repositories: Repositories  # registering repositories, webhook deliveries
    modules: Modules  # versions, downloads, yank and deprecation, conflicts
    jobs: Jobs  # the ingestion queue as operators see it
    providers: ProviderService  # hosted providers: protocol, uploads, keys, publishing
    mirror: MirrorService  # the provider network mirror
    module_proxy: ModuleProxyService  # the pull-through cache of public modules
    oci: Oci  # every release over the OCI Distribution API, under /v2/
    catalog: Catalog  # listing, search, records and documentation
    attestations: Attestations  # signed statements, their keys and the transparency log
    usage: DownloadUsage  # who uses which version
    workload_identity: WorkloadIdentity  # CI jobs' ID tokens, by [[workload_identity]] rules
    audit: AuditLog  # who did what
    semver: SemverGuard  # breaking changes in minor/patch releases: labelled or refused
    downloads: DownloadCounter  # download counts, flushed in batches
    health: Health  # readiness, for /readyz
    storage: Storage  # backup, a move to other backends, temp file sweeps
    # The machinery the features are built from.
    index: ModuleIndex
    blobs: BlobStore
    publisher: Publisher
    job_queue: JobQueue
    sync: SyncService
    auth: AuthIndex
    provider_publisher: ProviderPublisher
    registrations: RegistrationIndex
    secrets: SecretStore
    uploads: UploadStore  # staged CI uploads: DATA_DIR/uploads, or beside the S3 blobs
    staged_bytes: StagedBytesIndex  # what staged uploads hold, for the quotas
    catalog_index: CatalogIndex
    docs: Documenter
    provider_docs: ProviderDocsIndex
    searches: SearchCache

    def job_runner(self) -> JobRunner:
        """A runner for this process's jobs (started by `serve`, drained by
        `jobs run` and the tests)."""
        return self.jobs.runner()

    def close(self) -> None:
        self.job_queue.close()  # its writer thread uses the index: stop it first
        self.index.close()


def _repositories(
    settings: Settings,
    shared: Index,
    providers: ProviderIndex,
    secrets: SecretStore,
    publisher: Publisher,
    jobs: JobQueue,
    audit: AuditLog,
) -> Repositories:
    """Registering and syncing repositories, on the shared index."""
    registrations: RegistrationIndex = RegistrationStore(shared)
    return Repositories(
        settings=settings,
        index=shared,
        registrations=registrations,
        providers=providers,
        secrets=secrets,
        publisher=publisher,
        jobs=jobs,
        audit=audit,
    )


def _sync_lines(publisher: Publisher, repo: RepoRecord) -> str:
    result = publisher.sync_repo(repo)
    lines = [f"published {line}" for line in result.published]
    lines += [f"breaking  {line}" for line in result.breaking]
    lines += [f"conflict  {line}" for line in result.conflicts]
    return "\n".join([*lines, result.summary()])


def build_services(settings: Settings) -> Services:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    shared = open_index(settings.database_url, settings.db_path, settings.database_pool_size)
    try:
        return _assemble(settings, shared)
    except BaseException:
        # The database can fail half-way (it went down after the migrations):
        # its pool and change feed must not outlive a start that is retried.
        shared.close()
        raise


def _assemble(settings: Settings, shared: Index) -> Services:
    # The one place that names the SQLite and file implementations; everything
    # else sees the protocols (gitreg/storage/protocols.py).
    index: ModuleIndex = shared
    blobs: BlobStore = open_blob_store(settings)
    job_store: JobIndex = JobStore(shared)
    auth: AuthIndex = AuthStore(shared)
    provider_store: ProviderIndex = ProviderStore(shared)
    mirror_store: MirrorIndex = MirrorStore(shared)
    secrets = open_secret_store(settings.data_dir, settings.secret_key_file, shared)
    cache = MetadataCache[object](index.data_version, build_threads=settings.cache_build_threads)
    git = DulwichBackend(settings.git_timeout, settings.max_fetch_bytes)
    catalog: CatalogIndex = CatalogStore(shared)
    docs = Documenter(index, catalog, git, on_change=cache.invalidate)
    audit_store: AuditIndex = AuditStore(shared)
    audit = AuditLog(audit_store, settings.audit_retention_days)
    semver_store: SemverIndex = SemverStore(shared)
    semver = SemverGuard(
        store=semver_store,
        index=index,
        catalog=catalog,
        docs=docs,
        default_policy=settings.semver_check,
        # `allow-breaking` publishes at once (the publisher is bound below).
        sync=lambda repo: _sync_lines(publisher, repo),
        audit=audit,
    )
    signer = UrlSigner(secrets, settings.signed_url_ttl)
    access = Access(settings, auth, cache, signer, audit=audit)
    attestations = Attestations(
        settings=settings,
        store=AttestationStore(shared),
        keys=KeyRing(secrets),
        blobs=blobs,
        index=index,
        access=access,
        on_change=cache.invalidate,
        audit=audit,
    )
    publisher = Publisher(
        settings,
        index,
        blobs,
        git,
        on_change=cache.invalidate,
        docs=docs,
        audit=audit,
        attest=attestations,
        semver=semver,
    )
    jobs = JobQueue(job_store, settings)
    workload_identity = WorkloadIdentity(
        settings.workload_identity,
        store=auth,
        audit=audit,
        on_change=cache.invalidate,
        token_ttl=settings.workload_token_ttl,
        failures=access.limiter,
    )
    access.trust_workloads(workload_identity)
    provider_docs: ProviderDocsIndex = ProviderDocsStore(shared)
    provider_documenter = ProviderDocumenter(
        provider_store, provider_docs, git, publisher.fetch_mirror, cache.invalidate
    )
    provider_keys = KeyManager(settings, provider_store, secrets)
    providers = ProviderPublisher(
        settings,
        provider_store,
        blobs,
        cache.invalidate,
        keys=provider_keys,
        documenter=provider_documenter,
    )
    uploads = open_upload_store(settings, blobs)
    staged_bytes: StagedBytesIndex = StagedBytesStore(shared)
    provider_service = ProviderService(
        store=provider_store,
        publisher=providers,
        keys=provider_keys,
        staging=UploadStaging.for_settings(uploads, staged_bytes, settings),
        cache=cache,
        access=access,
        repos=index,
        max_package_bytes=settings.max_provider_package_bytes,
        audit=audit,
    )
    access.add_blob_owners(provider_store.blob_owners)
    access.add_blob_owners(mirror_store.blob_owners)
    counts: DownloadCountIndex = DownloadCountStore(shared)
    proxy_store: ModuleProxyIndex = ModuleProxyStore(shared)
    access.add_blob_owners(proxy_store.blob_owners)
    oci_store: OciIndex = OciStore(shared)
    access.add_blob_owners(oci_store.blob_owners)
    module_proxy = ModuleProxyService(
        proxy_options(settings), proxy_store, blobs, cache, settings.data_dir / "proxy-tmp"
    )
    searches = SearchCache(cache)
    reindexer = Reindexer(
        index=index,
        catalog=catalog,
        provider_docs=provider_docs,
        providers=provider_store,
        documenter=docs,
        provider_documenter=provider_documenter,
        mirror_path=publisher.mirror_path,
        on_change=cache.invalidate,
    )
    # One view of the issuer and one allowance per client address, shared by
    # both sign-in flows.
    oidc = OidcClient(settings)
    limits = SignInLimits(auth, settings.sign_in_per_client, settings.sign_in_pending_max)
    sync = SyncService(index, publisher, provider_service)
    repositories = _repositories(settings, shared, provider_store, secrets, publisher, jobs, audit)
    catalog_service = Catalog(
        index=index,
        catalog=catalog,
        provider_docs=provider_docs,
        providers=provider_store,
        mirror=mirror_store,
        proxied=proxy_store,
        cache=cache,
        searches=searches,
        reindexer=reindexer,
        blobs=blobs,
        provenance=attestations.provenance,
        semver=semver.labelled,
    )
    return Services(
        settings=settings,
        cache=cache,
        access=access,
        tokens=Tokens(auth, cache.invalidate, audit=audit),
        namespaces=Namespaces(auth, cache.invalidate, audit=audit),
        login=LoginFlow(
            settings, auth, oidc, cache.invalidate, limits, failures=access.limiter, audit=audit
        ),
        sign_in=WebSignIn(settings, auth, oidc, limits, audit=audit),
        repositories=repositories,
        modules=Modules(
            index=index, cache=cache, access=access, docs=docs, audit=audit, attest=attestations
        ),
        attestations=attestations,
        jobs=Jobs(settings=settings, queue=jobs, repos=repositories, sync=sync, audit=audit),
        providers=provider_service,
        mirror=build_mirror(settings, mirror_store, blobs, cache, access, signer, provider_store),
        module_proxy=module_proxy,
        oci=Oci(
            settings=settings,
            store=oci_store,
            modules=index,
            proxy=module_proxy,
            proxied=proxy_store,
            providers=provider_store,
            mirror=mirror_store,
            blobs=blobs,
            cache=cache,
            access=access,
        ),
        catalog=catalog_service,
        usage=DownloadUsage(counts=counts, modules=index),
        workload_identity=workload_identity,
        audit=audit,
        semver=semver,
        downloads=DownloadCounter(counts, index, provider_store),
        health=Health(settings, index, blobs, repositories.repos),
        storage=Storage(settings, index, blobs),
        index=index,
        blobs=blobs,
        publisher=publisher,
        job_queue=jobs,
        sync=sync,
        auth=auth,
        provider_publisher=providers,
        registrations=RegistrationStore(shared),
        secrets=secrets,
        uploads=uploads,
        staged_bytes=staged_bytes,
        catalog_index=catalog,
        docs=docs,
        provider_docs=provider_docs,
        searches=searches,
    )

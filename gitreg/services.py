"""The resources one gitreg process works with, built once from `Settings`.

The app factory and the CLI both build a `Services`; handlers reach it through
the typed `services(request)` accessor instead of untyped `request.state`.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from gitreg.auth.access import Access
from gitreg.auth.signed_urls import UrlSigner
from gitreg.cache import MetadataCache
from gitreg.git.backend import DulwichBackend
from gitreg.jobs.queue import JobQueue
from gitreg.mirror.service import MirrorService, build_mirror
from gitreg.modules.publisher import Publisher
from gitreg.providers.ingest import ProviderPublisher
from gitreg.settings import Settings
from gitreg.storage.auth import AuthStore
from gitreg.storage.blobs import FileBlobStore
from gitreg.storage.index import SQLiteIndex
from gitreg.storage.jobs import JobStore
from gitreg.storage.providers import ProviderStore
from gitreg.sync import SyncService


@dataclass
class Services:
    settings: Settings
    index: SQLiteIndex
    blobs: FileBlobStore
    publisher: Publisher
    cache: MetadataCache[object]
    jobs: JobQueue
    access: Access
    auth: AuthStore
    providers: ProviderPublisher
    mirror: MirrorService
    sync: SyncService

    def close(self) -> None:
        self.index.close()


def build_services(settings: Settings) -> Services:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    index = SQLiteIndex(settings.db_path)
    blobs = FileBlobStore(settings.blob_dir)
    cache: MetadataCache[object] = MetadataCache(index.data_version)
    publisher = Publisher(
        settings,
        index,
        blobs,
        DulwichBackend(settings.git_timeout, settings.max_fetch_bytes),
        on_change=cache.invalidate,
    )
    jobs = JobQueue(JobStore(index), settings)
    auth = AuthStore(index)
    access = Access(settings, auth, cache, UrlSigner(settings.secrets_dir, settings.signed_url_ttl))
    providers = ProviderPublisher(settings, ProviderStore(index), blobs, cache.invalidate)
    access.add_blob_owners(providers.store.blob_owners)
    return Services(
        settings,
        index,
        blobs,
        publisher,
        cache,
        jobs,
        access,
        auth,
        providers,
        build_mirror(settings, index, blobs, cache, providers.store),
        SyncService(index, publisher, providers),
    )


def services(request: Request) -> Services:
    found = request.app.state.services
    assert isinstance(found, Services)
    return found

"""The resources one gitreg process works with, built once from `Settings`.

The app factory and the CLI both build a `Services`; handlers reach it through
the typed `services(request)` accessor instead of untyped `request.state`.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from gitreg.cache import MetadataCache
from gitreg.git.backend import DulwichBackend
from gitreg.publisher import Publisher
from gitreg.settings import Settings
from gitreg.storage.blobs import FileBlobStore
from gitreg.storage.index import SQLiteIndex


@dataclass
class Services:
    settings: Settings
    index: SQLiteIndex
    blobs: FileBlobStore
    publisher: Publisher
    cache: MetadataCache[object]

    def close(self) -> None:
        self.index.close()


def build_services(settings: Settings) -> Services:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    index = SQLiteIndex(settings.db_path)
    blobs = FileBlobStore(settings.blob_dir)
    cache: MetadataCache[object] = MetadataCache(index.data_version)
    publisher = Publisher(
        settings, index, blobs, DulwichBackend(settings.git_timeout), on_change=cache.invalidate
    )
    return Services(settings, index, blobs, publisher, cache)


def services(request: Request) -> Services:
    found = request.app.state.services
    assert isinstance(found, Services)
    return found

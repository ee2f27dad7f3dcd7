"""The storage contract suite: every test here runs against each implementation.

Tests see the protocols only (gitreg/storage/protocols.py and `BlobStore`), so a
PostgreSQL index or an S3 blob store joins by adding a param to `implementation`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitreg.settings import load_settings
from gitreg.storage.auth import AuthStore
from gitreg.storage.blobs import BlobStore, FileBlobStore
from gitreg.storage.index import SQLiteIndex, open_index
from gitreg.storage.jobs import JobStore
from gitreg.storage.jobs_protocols import JobIndex
from gitreg.storage.mirror import MirrorStore
from gitreg.storage.module_proxy import ModuleProxyIndex, ModuleProxyStore
from gitreg.storage.protocols import (
    AuthIndex,
    MirrorIndex,
    ModuleIndex,
    ProviderIndex,
    RegistrationIndex,
)
from gitreg.storage.providers import ProviderStore
from gitreg.storage.registration import RegistrationStore
from gitreg.storage.select import open_blob_store
from tests.support.postgres import Database


@dataclass(frozen=True)
class Backend:
    """One implementation of every storage protocol, sharing one index."""

    index: ModuleIndex
    registrations: RegistrationIndex
    jobs: JobIndex
    providers: ProviderIndex
    mirror: MirrorIndex
    auth: AuthIndex
    blobs: BlobStore
    module_proxy: ModuleProxyIndex
    dialect: str = "sqlite"


def _sqlite_and_files(root: Path) -> Backend:
    sqlite = SQLiteIndex(root / "index.sqlite3")
    return Backend(
        index=sqlite,
        registrations=RegistrationStore(sqlite),
        jobs=JobStore(sqlite),
        providers=ProviderStore(sqlite),
        mirror=MirrorStore(sqlite),
        auth=AuthStore(sqlite),
        blobs=FileBlobStore(root / "blobs"),
        module_proxy=ModuleProxyStore(sqlite),
    )


def _postgres_and_files(root: Path, url: str) -> Backend:
    shared = open_index(url, root / "unused.sqlite3")
    return Backend(
        index=shared,
        registrations=RegistrationStore(shared),
        jobs=JobStore(shared),
        providers=ProviderStore(shared),
        mirror=MirrorStore(shared),
        auth=AuthStore(shared),
        blobs=FileBlobStore(root / "blobs"),
        module_proxy=ModuleProxyStore(shared),
        dialect="postgresql",
    )


@pytest.fixture(params=["sqlite+files", "postgresql+files"])
def implementation(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "postgresql+files":
        database = request.getfixturevalue("postgres_database")
        backend = _postgres_and_files(tmp_path, database.url)
    else:
        backend = _sqlite_and_files(tmp_path)
    yield backend
    backend.index.close()


@pytest.fixture
def postgres_url(postgres_database: Database) -> str:
    return postgres_database.url


# The blob-store contract (test_blob_store.py) runs against local disk and S3
# (moto's server on 127.0.0.1, through the real client); it needs no index, so
# it is not multiplied by the index implementations above.
@pytest.fixture(params=["files", "s3"])
def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    if request.param == "files":
        return FileBlobStore(tmp_path / "blobs")
    settings = load_settings(
        {"data_dir": tmp_path, "blob_store": request.getfixturevalue("s3").url},
        environ={"GITREG_S3_ADDRESSING": "path"},
    )
    return open_blob_store(settings)

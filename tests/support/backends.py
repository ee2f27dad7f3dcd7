"""Every storage engine, for the store contract tests of each feature.

A test that asks for `implementation` runs once per engine (SQLite and
PostgreSQL, with blobs on disk), and one that asks for `blobs` once per blob
store (files and S3). Tests see the protocols only (each feature's `store.py`,
gitreg/storage/protocols.py and `BlobStore`), so another engine joins by adding
a param here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitreg.auth.store import AuthIndex
from gitreg.auth.store_sql import AuthStore
from gitreg.jobs.store import JobIndex
from gitreg.jobs.store_sql import JobStore
from gitreg.mirror.store import MirrorIndex
from gitreg.mirror.store_sql import MirrorStore
from gitreg.module_proxy.store import ModuleProxyIndex
from gitreg.module_proxy.store_sql import ModuleProxyStore
from gitreg.providers.store import ProviderIndex
from gitreg.providers.store_sql import ProviderStore
from gitreg.repositories.store import RegistrationIndex
from gitreg.repositories.store_sql import RegistrationStore
from gitreg.settings import load_settings
from gitreg.storage.blobs import BlobStore, FileBlobStore
from gitreg.storage.index import Index, SQLiteIndex, open_index
from gitreg.storage.protocols import ModuleIndex
from gitreg.storage.records import NewVersion
from gitreg.storage.select import open_blob_store
from tests.support.postgres import Database


def new_version(module_id: int, version: str = "1.0.0", sha: str = "a" * 64) -> NewVersion:
    """A version record of made-up git and archive facts, for store tests."""
    return NewVersion(
        module_id=module_id,
        version=version,
        version_key=version,
        tag=f"v{version}",
        tag_sha="1" * 40,
        commit_sha="2" * 40,
        tree_sha="3" * 40,
        archive_sha256=sha,
        archive_size=123,
        archive_mtime=1700000000,
    )


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


@pytest.fixture(params=["sqlite", "postgresql"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Index]:
    """The shared index alone, once per engine: for a feature whose store
    writes through it (the audit log, the OCI records, attached writes)."""
    url = request.getfixturevalue("postgres_database").url if request.param != "sqlite" else ""
    opened = open_index(url, tmp_path / "index.sqlite3")
    yield opened
    opened.close()


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

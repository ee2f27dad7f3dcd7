"""Two registry instances sharing one index and one S3 bucket (moto's server,
tests/support/s3.py) fetch one new proxied version at once.

Each instance's single flight covers only its own requests, so both fetch and
both store an archive before either records the version; the first record
wins. What the bucket keeps afterwards is exactly what the index names.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import tarfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from gitreg.addresses import module_address
from gitreg.cache import MetadataCache
from gitreg.module_proxy.config import parse_module_proxy
from gitreg.module_proxy.options import proxy_options
from gitreg.module_proxy.service import ModuleProxyService
from gitreg.module_proxy.store import ProxiedVersion
from gitreg.module_proxy.store_sql import ModuleProxyStore
from gitreg.settings import Settings
from gitreg.storage.index import SQLiteIndex
from gitreg.storage.select import open_blob_store
from tests.module_proxy.conftest import MODULE, Upstream
from tests.support.s3 import S3Bucket

ADDRESS = module_address(*MODULE)


def _instance(root: Path, index: Path, upstream: Upstream, bucket: S3Bucket) -> ModuleProxyService:
    table = {
        "host": "registry.terraform.io",
        "url": upstream.registry_url,
        "namespaces": [MODULE[0]],
    }
    settings = Settings(
        data_dir=root,
        blob_store=bucket.url,
        s3_addressing="path",
        module_proxy=parse_module_proxy([table]),
    )
    shared = SQLiteIndex(index)
    return ModuleProxyService(
        proxy_options(settings),
        ModuleProxyStore(shared),
        open_blob_store(settings),
        MetadataCache(shared.data_version),
        root / "proxy-tmp",
    )


def _tar_gz(text: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        data = text.encode()
        info = tarfile.TarInfo("main.tf")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _serve(upstream: Upstream, version: str, text: str) -> None:
    upstream.registry.files[f"{version}.tar.gz"] = _tar_gz(text)
    upstream.registry.modules[MODULE][version] = f"{upstream.registry_url}/files/{version}.tar.gz"


def _fetch_together(
    one: ModuleProxyService,
    two: ModuleProxyService,
    version: str,
    between: Callable[[], None],
) -> ProxiedVersion:
    """`one` fetches and stores its archive and waits; `between` runs; `two`
    fetches and stores its own; then `one` records the version first, and
    `two` finds it recorded. The record both answered."""
    waiting = {one: threading.Event(), two: threading.Event()}
    recorded = threading.Event()

    def gate(service: ModuleProxyService, before: threading.Event) -> None:
        add = service._store.add_version

        def gated(record: ProxiedVersion) -> ProxiedVersion:
            waiting[service].set()
            assert before.wait(60), "the other fetch never got this far"
            stored = add(record)
            recorded.set()
            return stored

        service._store.add_version = gated  # type: ignore[method-assign]

    gate(one, waiting[two])
    gate(two, recorded)
    results: list[ProxiedVersion] = []
    first = threading.Thread(
        target=lambda: results.append(asyncio.run(one.cached(ADDRESS, version)))
    )
    first.start()
    assert waiting[one].wait(60), "the first fetch never got as far as recording"
    between()
    results.append(asyncio.run(two.cached(ADDRESS, version)))
    first.join()
    assert results[0] == results[1]
    return results[0]


@pytest.fixture
def instances(
    tmp_path: Path, upstream: Upstream, s3: S3Bucket
) -> tuple[ModuleProxyService, ModuleProxyService]:
    index = tmp_path / "index.sqlite3"
    return (
        _instance(tmp_path / "replica-1", index, upstream, s3),
        _instance(tmp_path / "replica-2", index, upstream, s3),
    )


def test_the_losing_fetch_removes_its_archive(
    instances: tuple[ModuleProxyService, ModuleProxyService], upstream: Upstream
) -> None:
    """The upstream answers the two fetches with other bytes (a tag moved, an
    archive replaced): the archive of the fetch that lost is removed."""
    one, two = instances
    _serve(upstream, "3.0.0", 'output "x" { value = 1 }\n')
    won = _fetch_together(
        one, two, "3.0.0", lambda: _serve(upstream, "3.0.0", 'output "x" { value = 2 }\n')
    )
    assert sorted(one.blobs.names()) == [won.archive_sha256]


def test_identical_bytes_are_one_blob_that_stays(
    instances: tuple[ModuleProxyService, ModuleProxyService], upstream: Upstream
) -> None:
    one, two = instances
    _serve(upstream, "3.0.0", 'output "x" { value = 1 }\n')
    won = _fetch_together(one, two, "3.0.0", lambda: None)
    assert sorted(one.blobs.names()) == [won.archive_sha256]
    with two.blobs.open(won.archive_sha256) as stored:
        assert hashlib.sha256(stored.read()).hexdigest() == won.archive_sha256


def test_a_losing_archive_that_another_version_names_stays(
    instances: tuple[ModuleProxyService, ModuleProxyService], upstream: Upstream
) -> None:
    """The loser's bytes may be a cached version's archive already: it stays."""
    one, two = instances
    _serve(upstream, "2.0.0", 'output "x" { value = 2 }\n')
    older = asyncio.run(one.cached(ADDRESS, "2.0.0"))
    _serve(upstream, "3.0.0", 'output "x" { value = 1 }\n')
    moved = upstream.registry.files["2.0.0.tar.gz"]
    won = _fetch_together(
        one, two, "3.0.0", lambda: upstream.registry.files.update({"3.0.0.tar.gz": moved})
    )
    assert won.archive_sha256 != older.archive_sha256
    assert sorted(one.blobs.names()) == sorted([older.archive_sha256, won.archive_sha256])

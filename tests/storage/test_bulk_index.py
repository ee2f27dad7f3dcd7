"""Contract: rows written in bulk (gitreg/storage/bulk.py, for bench/index_scale.py)
read back through the ordinary stores exactly as published ones do, on both
engines, and publishing afterwards still works (no id taken twice)."""

from __future__ import annotations

from gitreg.providers.store import PackageRecord
from gitreg.storage.bulk import (
    ROWS_PER_STATEMENT,
    BulkLoader,
    BulkModule,
    BulkProvider,
    BulkProviderVersion,
    BulkVersion,
)
from gitreg.storage.index import Index
from gitreg.storage.records import NewVersion
from tests.support.backends import Backend


def _loader(implementation: Backend) -> BulkLoader:
    assert isinstance(implementation.index, Index)
    return BulkLoader(implementation.index)


def _module(n: int, versions: int) -> BulkModule:
    return BulkModule(
        repo_url=f"https://git.example/m{n}.git",
        namespace="Bulk",
        name=f"m{n}",
        system="aws",
        versions=[
            BulkVersion(f"1.{v}.0", f"{n:020x}{v:020x}", "e" * 40, f"{n:032x}{v:032x}", 100 + v)
            for v in range(versions)
        ],
    )


def test_bulk_modules_read_back_and_publishing_continues(implementation: Backend) -> None:
    index = implementation.index
    # More modules than one statement holds, to cross a batch boundary.
    count = ROWS_PER_STATEMENT + 3
    _loader(implementation).add_modules([_module(n, 3) for n in range(count)])
    assert len(index.modules()) == count
    module = index.find_module("bulk", "m7", "AWS")
    assert module is not None
    assert (module.namespace, module.name, module.system) == ("Bulk", "m7", "aws")
    assert [v.version for v in index.versions(module.id)] == ["1.0.0", "1.1.0", "1.2.0"]
    found = index.version_by_key(module.id, "1.2.0")
    assert found is not None
    assert found.archive_sha256 == f"{7:032x}{2:032x}"
    assert found.tag == "v1.2.0"
    assert index.repo(module.repo_id).url == "https://git.example/m7.git"
    new = NewVersion(
        module.id, "2.0.0", "2.0.0", "v2.0.0", "a" * 40, "a" * 40, "b" * 40, "c" * 64, 9, 0
    )
    assert index.publish_version(new)
    assert [v.version for v in index.versions(module.id)][-1] == "2.0.0"
    added = index.add_module(
        index.add_repo("https://git.example/new.git", "").id, "n", "n", "aws", "", ""
    )
    assert added.id not in {m.id for m in index.modules() if m.name != "n"}


def test_bulk_providers_read_back(implementation: Backend) -> None:
    providers = implementation.providers
    key, _ = providers.add_key("bulk", "ABCDEF0123456789", "F" * 40, "armor", ("rsa",), True, "t")
    package = PackageRecord("linux", "amd64", "p.zip", "d" * 64, 10, "h1:x")
    bulk = [
        BulkProvider(
            "bulk",
            f"p{n}",
            [BulkProviderVersion(f"0.{v}.0", "a" * 64, "b" * 64, [package]) for v in range(2)],
        )
        for n in range(3)
    ]
    _loader(implementation).add_providers(bulk, key.id, "publisher")
    provider = providers.find_provider("bulk/p2")
    assert provider is not None
    versions = providers.provider_versions(provider.id)
    assert [v.version for v in versions] == ["0.0.0", "0.1.0"]
    assert [(p.os, p.arch, p.sha256) for p in providers.packages(versions[1].id)] == [
        ("linux", "amd64", "d" * 64)
    ]
    assert providers.add_provider("bulk", "new").id not in {
        p.id for p in providers.providers() if p.type != "new"
    }

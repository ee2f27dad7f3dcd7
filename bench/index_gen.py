"""Fill a gitreg index with many modules and providers, fast.

The rows are what publishing records (gitreg/storage/bulk.py writes them many per
statement, in transactions of `BATCH` modules), without git repositories or
archive files behind them: answers that only read the index (discovery,
versions, download locations, provider metadata) are exactly as for published
versions; downloading an archive of a generated version is a 404.

Modules `ns{i % 200}/m{i}/{aws|azurerm|google}`, versions spread over majors,
minors and patches; providers `pns{i % 50}/p{i}` with versions x platforms.

    python bench/index_gen.py DATA_DIR [--modules 10000] [--versions 50] [--providers 1000]
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gitreg.providers.store import PackageRecord
from gitreg.storage.bulk import (
    BulkModule,
    BulkProvider,
    BulkProviderVersion,
    BulkVersion,
)

SYSTEMS = ("aws", "azurerm", "google")
PLATFORMS = (("linux", "amd64"), ("linux", "arm64"), ("darwin", "arm64"), ("windows", "amd64"))
BATCH = 500


@dataclass(frozen=True)
class Generated:
    modules: int
    versions: int
    providers: int
    provider_versions: int
    seconds: float
    db_bytes: int


def module_address(i: int) -> tuple[str, str, str]:
    return f"ns{i % 200}", f"m{i}", SYSTEMS[i % len(SYSTEMS)]


def version_string(v: int) -> str:
    return f"{v // 25}.{(v // 5) % 5}.{v % 5}"


def _hex(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _modules(count: int, versions: int) -> Iterator[BulkModule]:
    for i in range(count):
        namespace, name, system = module_address(i)
        yield BulkModule(
            repo_url=f"https://git.example/{namespace}/{name}.git",
            namespace=namespace,
            name=name,
            system=system,
            versions=[
                BulkVersion(
                    version_string(v),
                    _hex(f"c{i}.{v}", 40),
                    _hex(f"t{i}.{v}", 40),
                    _hex(f"a{i}.{v}", 64),
                    10_000 + v,
                )
                for v in range(versions)
            ],
        )


def _providers(count: int, versions: int) -> list[BulkProvider]:
    out: list[BulkProvider] = []
    for i in range(count):
        releases = []
        for v in range(versions):
            version = version_string(v)
            packages = [
                PackageRecord(
                    os_,
                    arch,
                    f"terraform-provider-p{i}_{version}_{os_}_{arch}.zip",
                    _hex(f"z{i}.{v}.{os_}.{arch}", 64),
                    5_000_000,
                    "h1:" + _hex(f"h{i}.{v}.{os_}.{arch}", 43),
                )
                for os_, arch in PLATFORMS
            ]
            releases.append(
                BulkProviderVersion(version, _hex(f"s{i}.{v}", 64), _hex(f"g{i}.{v}", 64), packages)
            )
        out.append(BulkProvider(f"pns{i % 50}", f"p{i}", releases))
    return out


def generate(
    data_dir: Path,
    modules: int,
    versions: int,
    providers: int,
    provider_versions: int = 10,
    database_url: str = "",
) -> Generated:
    """Fill the index of `data_dir` (or the PostgreSQL database at `database_url`)."""
    from gitreg.providers.store_sql import ProviderStore
    from gitreg.settings import load_settings
    from gitreg.storage.bulk import BulkLoader
    from gitreg.storage.index import Index, open_index

    db_path = load_settings({"data_dir": data_dir}).db_path
    start = time.perf_counter()
    index = open_index(database_url, db_path)
    assert isinstance(index, Index)
    try:
        loader = BulkLoader(index)
        batch: list[BulkModule] = []
        for module in _modules(modules, versions):
            batch.append(module)
            if len(batch) == BATCH:
                loader.add_modules(batch)
                batch = []
        if batch:
            loader.add_modules(batch)
        store = ProviderStore(index)
        by_namespace: dict[str, list[BulkProvider]] = {}
        for provider in _providers(providers, provider_versions):
            by_namespace.setdefault(provider.namespace, []).append(provider)
        for namespace, group in sorted(by_namespace.items()):
            key, _ = store.add_key(
                namespace, "ABCDEF0123456789", "F" * 40, "armor", ("rsa",), True, "bench"
            )
            loader.add_providers(group, key.id, "bench")
    finally:
        index.close()
    seconds = time.perf_counter() - start
    size = db_path.stat().st_size if not database_url and db_path.exists() else 0
    return Generated(
        modules, modules * versions, providers, providers * provider_versions, seconds, size
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--modules", type=int, default=10_000)
    parser.add_argument("--versions", type=int, default=50)
    parser.add_argument("--providers", type=int, default=1_000)
    parser.add_argument("--database-url", default="")
    args = parser.parse_args()
    done = generate(
        args.data_dir, args.modules, args.versions, args.providers, database_url=args.database_url
    )
    print(
        f"{done.modules:,} modules, {done.versions:,} versions, {done.providers:,} providers"
        f" ({done.provider_versions:,} versions) in {done.seconds:.1f} s;"
        f" index {done.db_bytes / 2**20:.0f} MiB"
    )


if __name__ == "__main__":
    main()

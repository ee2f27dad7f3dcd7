"""Many index rows in one transaction, for building a large index quickly.

The index-scale target is measured with 10,000 modules x 50 versions and 1,000
providers (bench/index_scale.py). Publishing that many versions one by one
would take hours (an fsync, a git fetch and an archive build each); these
methods write the same rows the publishers write (`Index.publish_version`,
`ProviderStore.publish_provider_version`), many per statement, on either engine.
Nothing here checks what publishing checks (tags, archives, signatures): the
caller vouches for its rows.

Ids are never given: PostgreSQL's identity columns would not advance past
them. Parents are inserted first and their ids read back by their unique keys.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from gitreg.providers.store import PackageRecord
from gitreg.storage.database import Connection
from gitreg.storage.index import IndexBackedStore, address_key, utcnow

# Rows per INSERT statement: well under SQLite's 32,766 bound variables and
# PostgreSQL's 65,535 parameters for the widest table here (10 columns).
ROWS_PER_STATEMENT = 500

# The only tables and columns written here (never caller-supplied text in SQL).
_COLUMNS = {
    "repos": ("url", "created_at"),
    "modules": ("repo_id", "namespace", "name", "system", "address_key", "created_at"),
    "module_versions": (
        "module_id",
        "version",
        "version_key",
        "tag",
        "tag_sha",
        "commit_sha",
        "tree_sha",
        "archive_sha256",
        "archive_size",
        "published_at",
    ),
    "providers": ("namespace", "type", "address_key", "created_at"),
    "provider_versions": (
        "provider_id",
        "version",
        "protocols",
        "shasums_filename",
        "shasums_sha256",
        "signature_sha256",
        "key_id",
        "signed_by",
        "source",
        "published_at",
    ),
    "provider_packages": ("version_id", "os", "arch", "filename", "sha256", "size", "h1"),
}


@dataclass(frozen=True)
class BulkVersion:
    version: str  # also its version_key and, with a "v", its tag: canonical semver only
    commit_sha: str
    tree_sha: str
    archive_sha256: str
    archive_size: int


@dataclass(frozen=True)
class BulkModule:
    repo_url: str
    namespace: str
    name: str
    system: str
    versions: Sequence[BulkVersion]


@dataclass(frozen=True)
class BulkProviderVersion:
    version: str
    shasums_sha256: str
    signature_sha256: str
    packages: Sequence[PackageRecord]  # the rows `ProviderStore.packages` reads back


@dataclass(frozen=True)
class BulkProvider:
    namespace: str
    type: str
    versions: Sequence[BulkProviderVersion]


def _insert(conn: Connection, table: str, rows: Sequence[tuple[object, ...]]) -> None:
    columns = _COLUMNS[table]
    one = "(" + ", ".join("?" * len(columns)) + ")"
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        batch = rows[start : start + ROWS_PER_STATEMENT]
        values = ", ".join([one] * len(batch))
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES {values}"  # noqa: S608
        conn.execute(sql, tuple(value for row in batch for value in row))


def _ids(conn: Connection, table: str, column: str, keys: Sequence[str]) -> dict[str, int]:
    """`id` of each row whose unique `column` is in `keys`."""
    found: dict[str, int] = {}
    for start in range(0, len(keys), ROWS_PER_STATEMENT):
        batch = keys[start : start + ROWS_PER_STATEMENT]
        marks = ", ".join("?" * len(batch))
        sql = f"SELECT {column}, id FROM {table} WHERE {column} IN ({marks})"  # noqa: S608
        found.update((str(row[0]), int(row[1])) for row in conn.execute(sql, tuple(batch)))
    return found


class BulkLoader(IndexBackedStore):
    def add_modules(self, modules: Sequence[BulkModule]) -> None:
        """Each module with its own repository and its versions, in one transaction."""
        now = utcnow()
        with self._write() as conn:
            _insert(conn, "repos", [(m.repo_url, now) for m in modules])
            repos = _ids(conn, "repos", "url", [m.repo_url for m in modules])
            keys = [address_key(m.namespace, m.name, m.system) for m in modules]
            rows = [
                (repos[m.repo_url], m.namespace, m.name, m.system, key, now)
                for m, key in zip(modules, keys, strict=True)
            ]
            _insert(conn, "modules", rows)
            ids = _ids(conn, "modules", "address_key", keys)
            versions = [
                (
                    ids[key],
                    v.version,
                    v.version,
                    "v" + v.version,
                    v.commit_sha,
                    v.commit_sha,
                    v.tree_sha,
                    v.archive_sha256,
                    v.archive_size,
                    now,
                )
                for m, key in zip(modules, keys, strict=True)
                for v in m.versions
            ]
            _insert(conn, "module_versions", versions)

    def add_providers(
        self, providers: Sequence[BulkProvider], key_row: int, signed_by: str
    ) -> None:
        """Providers with their versions and packages, signed by the key with
        row id `key_row` (`ProviderStore.add_key`), in one transaction."""
        now = utcnow()
        with self._write() as conn:
            keys = [f"{p.namespace}/{p.type}".lower() for p in providers]
            rows = [(p.namespace, p.type, k, now) for p, k in zip(providers, keys, strict=True)]
            _insert(conn, "providers", rows)
            ids = _ids(conn, "providers", "address_key", keys)
            for provider, key in zip(providers, keys, strict=True):
                self._add_provider_versions(conn, ids[key], provider, key_row, signed_by, now)

    @staticmethod
    def _add_provider_versions(
        conn: Connection, provider_id: int, p: BulkProvider, key_row: int, signed_by: str, now: str
    ) -> None:
        protocols = json.dumps(["5.0"])
        rows = [
            (
                provider_id,
                v.version,
                protocols,
                f"terraform-provider-{p.type}_{v.version}_SHA256SUMS",
                v.shasums_sha256,
                v.signature_sha256,
                key_row,
                signed_by,
                "bulk",
                now,
            )
            for v in p.versions
        ]
        _insert(conn, "provider_versions", rows)
        found = conn.execute(
            "SELECT version, id FROM provider_versions WHERE provider_id = ?", (provider_id,)
        )
        ids = {str(row[0]): int(row[1]) for row in found}
        packages = [
            (ids[v.version], k.os, k.arch, k.filename, k.sha256, k.size, k.h1)
            for v in p.versions
            for k in v.packages
        ]
        _insert(conn, "provider_packages", packages)

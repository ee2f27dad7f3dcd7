"""All provider SQL: providers, their signing keys, versions, packages, upload tokens.

`ProviderStore` shares `SQLiteIndex`'s connection and lock (same package, as
`gitreg.jobs.store_sql` does): one writer per process, `BEGIN IMMEDIATE` writes.
The schema is migration `0003-providers` in
`gitreg.storage.schema`. A process's own commits do not move its
`data_version`, so publishers call the metadata cache's `invalidate`
themselves; other processes notice through `data_version`.
"""

from __future__ import annotations

import json

from gitreg.errors import Conflict, NotFound
from gitreg.providers.store import (
    KeyRecord,
    NewProviderVersion,
    PackageRecord,
    ProviderRecord,
    ProviderVersionRecord,
)
from gitreg.storage.database import Row
from gitreg.storage.index import IndexBackedStore, from_row, utcnow


class ProviderStore(IndexBackedStore):
    # -- providers ----------------------------------------------------------

    def add_provider(
        self,
        namespace: str,
        type_: str,
        repo_id: int | None = None,
        forge: str = "",
        sign_releases: bool = False,
    ) -> ProviderRecord:
        """Get or create; a provider fed by one repository cannot be claimed by another."""
        key = f"{namespace}/{type_}".lower()
        with self._write() as conn:
            row = conn.execute(
                "SELECT repo_id FROM providers WHERE address_key = ?", (key,)
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO providers (namespace, type, address_key, repo_id, forge,"
                    " sign_releases, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (namespace, type_, key, repo_id, forge, int(sign_releases), utcnow()),
                )
            elif repo_id is not None:
                if row["repo_id"] not in (None, repo_id):
                    raise Conflict(f"provider {key} is already registered with another repository")
                conn.execute(
                    "UPDATE providers SET repo_id = ?, forge = ?, sign_releases = ?"
                    " WHERE address_key = ?",
                    (repo_id, forge, int(sign_releases), key),
                )
        found = self.find_provider(key)
        assert found is not None
        return found

    def find_provider(self, address_key: str) -> ProviderRecord | None:
        rows = self._rows("SELECT * FROM providers WHERE address_key = ?", (address_key.lower(),))
        return _provider(rows[0]) if rows else None

    def provider(self, provider_id: int) -> ProviderRecord:
        rows = self._rows("SELECT * FROM providers WHERE id = ?", (provider_id,))
        if not rows:
            raise NotFound(f"no provider #{provider_id}")
        return _provider(rows[0])

    def providers(self) -> list[ProviderRecord]:
        return [_provider(r) for r in self._rows("SELECT * FROM providers ORDER BY address_key")]

    def providers_of_repo(self, repo_id: int) -> list[ProviderRecord]:
        rows = self._rows("SELECT * FROM providers WHERE repo_id = ? ORDER BY id", (repo_id,))
        return [_provider(r) for r in rows]

    def record_provider_sync(self, provider_id: int, report: list[str]) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE providers SET last_sync_at = ?, last_sync_report = ? WHERE id = ?",
                (utcnow(), json.dumps(report), provider_id),
            )

    # -- signing keys -------------------------------------------------------

    def add_key(
        self,
        namespace: str,
        key_id: str,
        fingerprint: str,
        ascii_armor: str,
        algorithms: tuple[str, ...],
        terraform_compatible: bool,
        origin: str,
    ) -> tuple[KeyRecord, bool]:
        """Register a key for a namespace; (record, False) when it was already there."""
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO provider_keys (namespace_key, key_id, fingerprint, ascii_armor,"
                " algorithms, terraform_compatible, origin, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    namespace.lower(),
                    key_id,
                    fingerprint,
                    ascii_armor,
                    json.dumps(list(algorithms)),
                    int(terraform_compatible),
                    origin,
                    utcnow(),
                ),
            )
            created = cursor.rowcount == 1
        rows = self._rows(
            "SELECT * FROM provider_keys WHERE namespace_key = ? AND fingerprint = ?",
            (namespace.lower(), fingerprint),
        )
        return _key(rows[0]), created

    def keys(self, namespace: str | None = None, active_only: bool = False) -> list[KeyRecord]:
        sql = "SELECT * FROM provider_keys"
        params: tuple[str, ...] = ()
        clauses = []
        if namespace is not None:
            clauses.append("namespace_key = ?")
            params = (namespace.lower(),)
        if active_only:
            clauses.append("retired_at IS NULL")
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        return [_key(r) for r in self._rows(sql + " ORDER BY namespace_key, id", params)]

    def key(self, row_id: int) -> KeyRecord:
        rows = self._rows("SELECT * FROM provider_keys WHERE id = ?", (row_id,))
        if not rows:
            raise NotFound(f"no signing key #{row_id}")
        return _key(rows[0])

    def retire_key(self, namespace: str, key_id: str) -> KeyRecord:
        """Stop using a key for new versions; versions it signed keep serving it."""
        with self._write() as conn:
            rows = conn.execute(
                "SELECT id FROM provider_keys WHERE namespace_key = ? AND"
                " (key_id = ? OR fingerprint = ?)",
                (namespace.lower(), key_id.upper(), key_id.upper()),
            ).fetchall()
            if not rows:
                raise NotFound(f"namespace {namespace!r} has no key {key_id}")
            conn.execute(
                "UPDATE provider_keys SET retired_at = ? WHERE id = ? AND retired_at IS NULL",
                (utcnow(), rows[0]["id"]),
            )
        return self.key(rows[0]["id"])

    def key_use_count(self, row_id: int) -> int:
        rows = self._rows("SELECT count(*) FROM provider_versions WHERE key_id = ?", (row_id,))
        return int(rows[0][0])

    # -- versions and packages ----------------------------------------------

    def provider_version(self, provider_id: int, version: str) -> ProviderVersionRecord | None:
        rows = self._rows(
            "SELECT * FROM provider_versions WHERE provider_id = ? AND version = ?",
            (provider_id, version),
        )
        return _version(rows[0]) if rows else None

    def provider_versions(self, provider_id: int) -> list[ProviderVersionRecord]:
        rows = self._rows(
            "SELECT * FROM provider_versions WHERE provider_id = ? ORDER BY id", (provider_id,)
        )
        return [_version(r) for r in rows]

    def set_provider_yanked(self, provider_id: int, version: str, yanked: bool) -> None:
        """Yank or unyank one version; a normal write, so on PostgreSQL the
        other replicas' metadata caches hear of it through the change feed."""
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE provider_versions SET yanked = ? WHERE provider_id = ? AND version = ?",
                (int(yanked), provider_id, version),
            )
            if cursor.rowcount == 0:
                raise NotFound(f"no version {version}")

    def packages(self, version_row: int) -> list[PackageRecord]:
        rows = self._rows(
            "SELECT * FROM provider_packages WHERE version_id = ? ORDER BY os, arch",
            (version_row,),
        )
        return [_package(r) for r in rows]

    def packages_by_version(self, provider_id: int) -> dict[int, list[PackageRecord]]:
        """Every package of every version of a provider, in one query."""
        rows = self._rows(
            "SELECT p.* FROM provider_packages p JOIN provider_versions v ON v.id = p.version_id"
            " WHERE v.provider_id = ? ORDER BY p.os, p.arch",
            (provider_id,),
        )
        found: dict[int, list[PackageRecord]] = {}
        for row in rows:
            found.setdefault(row["version_id"], []).append(_package(row))
        return found

    def publish_provider_version(self, new: NewProviderVersion) -> bool:
        """Record a version and its packages in one transaction; False if it exists.

        Every blob is already durable in the blob store, so a crash
        before COMMIT leaves at most unreferenced blobs, never a half version."""
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO provider_versions (provider_id, version, protocols,"
                " shasums_filename, shasums_sha256, signature_sha256, key_id, signed_by,"
                " source, published_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING RETURNING id",
                (
                    new.provider_id,
                    new.version,
                    json.dumps(list(new.protocols)),
                    new.shasums_filename,
                    new.shasums_sha256,
                    new.signature_sha256,
                    new.key_row,
                    new.signed_by,
                    new.source,
                    utcnow(),
                ),
            )
            inserted = cursor.fetchone()
            if inserted is None:  # ON CONFLICT DO NOTHING returned no row
                return False
            for p in new.packages:
                conn.execute(
                    "INSERT INTO provider_packages (version_id, os, arch, filename, sha256,"
                    " size, h1) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (inserted[0], p.os, p.arch, p.filename, p.sha256, p.size, p.h1),
                )
        return True

    # -- access ------------------------------------------------------------

    def blob_owners(self) -> list[tuple[str, str]]:
        """(namespace, sha256) of every served provider file, so private
        namespaces' files are served only through signed URLs."""
        rows = self._rows(
            "SELECT p.namespace, v.shasums_sha256, v.signature_sha256, k.sha256"
            " FROM provider_versions v JOIN providers p ON p.id = v.provider_id"
            " JOIN provider_packages k ON k.version_id = v.id"
        )
        owners: set[tuple[str, str]] = set()
        for row in rows:
            namespace = str(row[0]).lower()
            owners.update((namespace, str(sha)) for sha in row[1:])
        return sorted(owners)


def _provider(row: Row) -> ProviderRecord:
    return from_row(ProviderRecord, row, sign_releases=bool(row["sign_releases"]))


def _key(row: Row) -> KeyRecord:
    return from_row(
        KeyRecord,
        row,
        namespace=row["namespace_key"],
        algorithms=tuple(json.loads(row["algorithms"])),
        terraform_compatible=bool(row["terraform_compatible"]),
    )


def _version(row: Row) -> ProviderVersionRecord:
    return from_row(
        ProviderVersionRecord,
        row,
        protocols=tuple(json.loads(row["protocols"])),
        key_row=row["key_id"],
        yanked=bool(row["yanked"]),
    )


def _package(row: Row) -> PackageRecord:
    return from_row(PackageRecord, row)

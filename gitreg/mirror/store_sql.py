"""All SQL of the provider network mirror (migration `0004-mirror`).

`MirrorStore` shares `SQLiteIndex`'s connection and lock, as the provider and
job stores do: one writer per process, `BEGIN IMMEDIATE` writes.
A process's own commits do not move its `data_version`, so the mirror
invalidates its own process's metadata cache after writing; other processes
notice through `data_version`.

Package rows are immutable: a second fill of the same
(provider, version, platform) keeps the first row, and `add_package` reports
the stored one so the caller can see a conflicting upstream.
"""

from __future__ import annotations

import json

from gitreg.mirror.store import CachedIndex, CachedVersion, MirrorPackage
from gitreg.storage.database import Row
from gitreg.storage.index import IndexBackedStore, from_row


class MirrorStore(IndexBackedStore):
    # -- version lists ------------------------------------------------------------------

    def index(self, provider_key: str) -> CachedIndex | None:
        rows = self._rows("SELECT * FROM mirror_indexes WHERE provider_key = ?", (provider_key,))
        return _index(rows[0]) if rows else None

    def indexes(self) -> list[CachedIndex]:
        return [_index(r) for r in self._rows("SELECT * FROM mirror_indexes ORDER BY provider_key")]

    def save_index(
        self,
        provider_key: str,
        hostname: str,
        namespace: str,
        type_: str,
        versions: list[CachedVersion],
        fetched_at: float,
    ) -> bool:
        """Record a good upstream answer; True when the version list changed."""
        document = json.dumps(
            [
                {
                    "version": v.version,
                    "protocols": list(v.protocols),
                    "platforms": list(v.platforms),
                }
                for v in versions
            ],
            separators=(",", ":"),
        )
        with self._write() as conn:
            row = conn.execute(
                "SELECT versions FROM mirror_indexes WHERE provider_key = ?", (provider_key,)
            ).fetchone()
            conn.execute(
                "INSERT INTO mirror_indexes (provider_key, hostname, namespace, type, versions,"
                " fetched_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (provider_key) DO UPDATE"
                " SET versions = excluded.versions, fetched_at = excluded.fetched_at",
                (provider_key, hostname, namespace, type_, document, fetched_at),
            )
        return row is None or row["versions"] != document

    # -- packages -----------------------------------------------------------------------

    def packages(self, provider_key: str, version: str | None = None) -> list[MirrorPackage]:
        if version is None:
            rows = self._rows(
                "SELECT * FROM mirror_packages WHERE provider_key = ? ORDER BY version, platform",
                (provider_key,),
            )
        else:
            rows = self._rows(
                "SELECT * FROM mirror_packages WHERE provider_key = ? AND version = ?"
                " ORDER BY platform",
                (provider_key, version),
            )
        return [_package(r) for r in rows]

    def package(self, provider_key: str, version: str, platform: str) -> MirrorPackage | None:
        rows = self._rows(
            "SELECT * FROM mirror_packages WHERE provider_key = ? AND version = ? AND platform = ?",
            (provider_key, version, platform),
        )
        return _package(rows[0]) if rows else None

    def cached_provider_keys(self) -> list[str]:
        rows = self._rows("SELECT DISTINCT provider_key FROM mirror_packages ORDER BY 1")
        return [str(r[0]) for r in rows]

    def add_package(self, package: MirrorPackage) -> MirrorPackage:
        """Insert unless present; returns the row now stored (the older one wins)."""
        with self._write() as conn:
            conn.execute(
                "INSERT INTO mirror_packages (provider_key, version, platform, filename, sha256,"
                " size, h1, protocols, key_id, source_url, fetched_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    package.provider_key,
                    package.version,
                    package.platform,
                    package.filename,
                    package.sha256,
                    package.size,
                    package.h1,
                    json.dumps(list(package.protocols)),
                    package.key_id,
                    package.source_url,
                    package.fetched_at,
                ),
            )
        stored = self.package(package.provider_key, package.version, package.platform)
        assert stored is not None
        return stored

    def blob_owners(self) -> list[tuple[str, str]]:
        """(lower-cased upstream namespace, zip sha256) of every cached package:
        the mirror route serves a zip under its upstream namespace, so the
        namespace's privacy must hold for the zip's blob too."""
        rows = self._rows("SELECT DISTINCT provider_key, sha256 FROM mirror_packages")
        # provider_key is `hostname/namespace/type` (ProviderAddress.key).
        return [(str(r[0]).split("/")[1].lower(), str(r[1])) for r in rows]


def _index(row: Row) -> CachedIndex:
    versions = tuple(
        CachedVersion(
            str(v["version"]),
            tuple(str(p) for p in v.get("protocols", [])),
            tuple(str(p) for p in v.get("platforms", [])),
        )
        for v in json.loads(row["versions"])
    )
    return CachedIndex(
        provider_key=row["provider_key"],
        hostname=row["hostname"],
        namespace=row["namespace"],
        type=row["type"],
        versions=versions,
        fetched_at=float(row["fetched_at"]),
    )


def _package(row: Row) -> MirrorPackage:
    return from_row(MirrorPackage, row, protocols=tuple(json.loads(row["protocols"])))

"""All SQL of the OCI feature (migration `0028-oci-zips`), shared by SQLite
and PostgreSQL. Like the other feature stores it writes on the index's
connection, under its writer lock."""

from __future__ import annotations

import time

from gitreg.oci.store import ModuleZip
from gitreg.storage.database import Row
from gitreg.storage.index import IndexBackedStore, from_row

_SELECT = "SELECT archive, zip_sha256, zip_size, builder FROM oci_module_zips"
# Bounds one IN list; a module's versions are read in pieces of this size.
_PIECE = 500


class OciStore(IndexBackedStore):
    def module_zip(self, archive_sha256: str) -> ModuleZip | None:
        rows = self._rows(_SELECT + " WHERE archive = ?", (archive_sha256,))
        return _zip(rows[0]) if rows else None

    def module_zips(self, archive_sha256s: list[str]) -> dict[str, ModuleZip]:
        found: dict[str, ModuleZip] = {}
        wanted = sorted(set(archive_sha256s))
        for start in range(0, len(wanted), _PIECE):
            piece = wanted[start : start + _PIECE]
            marks = ", ".join("?" * len(piece))
            for row in self._rows(f"{_SELECT} WHERE archive IN ({marks})", tuple(piece)):
                record = _zip(row)
                found[record.archive_sha256] = record
        return found

    def add_module_zip(self, record: ModuleZip) -> ModuleZip:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO oci_module_zips (archive, zip_sha256, zip_size, builder,"
                " built_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    record.archive_sha256,
                    record.zip_sha256,
                    record.zip_size,
                    record.builder,
                    time.time(),
                ),
            )
        stored = self.module_zip(record.archive_sha256)
        assert stored is not None
        return stored

    def blob_owners(self) -> list[tuple[str, str]]:
        rows = self._rows(
            "SELECT DISTINCT lower(m.namespace), z.zip_sha256 FROM oci_module_zips z"
            " JOIN module_versions v ON v.archive_sha256 = z.archive"
            " JOIN modules m ON m.id = v.module_id"
            " UNION SELECT DISTINCT lower(p.namespace), z.zip_sha256 FROM oci_module_zips z"
            " JOIN module_proxy_versions p ON p.archive_sha256 = z.archive"
        )
        return [(str(r[0]), str(r[1])) for r in rows]


def _zip(row: Row) -> ModuleZip:
    return from_row(
        ModuleZip, row, archive_sha256=str(row["archive"]), zip_size=int(row["zip_size"])
    )

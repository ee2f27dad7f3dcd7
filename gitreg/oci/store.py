"""What the OCI feature keeps in the index: the zip built for each module
archive (migration `0028-oci-zips`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ModuleZip:
    """The zip layer of every module version whose registry archive is `archive_sha256`."""

    archive_sha256: str
    zip_sha256: str
    zip_size: int
    builder: str  # gitreg/oci/zips.py BUILDER when it was built


class OciIndex(Protocol):
    def module_zip(self, archive_sha256: str) -> ModuleZip | None: ...

    def module_zips(self, archive_sha256s: list[str]) -> dict[str, ModuleZip]:
        """The zips already built for these archives, by archive sha256."""
        ...

    def add_module_zip(self, record: ModuleZip) -> ModuleZip:
        """Record a zip unless one is recorded for the archive; the row now
        stored (the first build wins, so a layer digest never changes). The
        zip blob is durable first."""
        ...

    def blob_owners(self) -> list[tuple[str, str]]:
        """(lower-cased namespace, zip sha256) of every zip of a hosted or
        proxied module version, for the access policy on private namespaces."""
        ...

"""Which index columns name a blob by its sha256.

Blobs are content-addressed, so one blob may be named by rows of several
features at once (a proxied archive with the same bytes as one of gitreg's
own, a zip both published and mirrored). A blob may be removed only when
none of these columns names it; a new column that names blobs belongs here
(tests/module_proxy/test_module_proxy_index.py finds every `*sha256` column).
"""

from __future__ import annotations

BLOB_COLUMNS: tuple[tuple[str, str], ...] = (
    ("module_versions", "archive_sha256"),
    ("archives", "sha256"),
    ("subtree_archives", "sha256"),
    ("provider_versions", "shasums_sha256"),
    ("provider_versions", "signature_sha256"),
    ("provider_packages", "sha256"),
    ("mirror_packages", "sha256"),
    ("module_proxy_versions", "archive_sha256"),
    ("oci_module_zips", "zip_sha256"),
    ("module_attestations", "archive_sha256"),
)

# `*sha256` columns that name no blob: the hash of what the row itself holds.
NOT_BLOB_COLUMNS: tuple[tuple[str, str], ...] = (
    ("module_attestations", "statement_sha256"),  # of the envelope's payload, kept in the row
)

# A row if any column names the blob; the sha256 is bound once per column. The
# table and column names are the constants above, never input.
_EACH = [f"SELECT 1 FROM {table} WHERE {column} = ?" for table, column in BLOB_COLUMNS]  # noqa: S608
REFERENCED = " UNION ALL ".join(_EACH) + " LIMIT 1"

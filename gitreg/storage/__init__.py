"""Storage behind narrow interfaces: the index (metadata) and the blob store (bytes).

Code outside this package types against the protocols in `protocols.py` (one per
aggregate) and `blobs.BlobStore`; only `gitreg.services.build_services` names the
SQLite and file implementations, so a PostgreSQL index or an S3 blob store can be
added beside them. tests/storage/ holds the contract every implementation passes.
"""

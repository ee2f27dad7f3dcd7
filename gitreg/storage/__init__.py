"""Storage behind narrow interfaces: the index (metadata) and the blob store (bytes).

Handlers and the publisher only use `Index` and `BlobStore`; a PostgreSQL index
or an S3 blob store can be added beside the SQLite and file implementations.
"""

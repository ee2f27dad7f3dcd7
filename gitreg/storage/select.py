"""Which `BlobStore` the settings ask for: DATA_DIR/blobs, or S3.

The S3 store (and its client library) is imported only when `blob_store` is an
`s3://` URL: a registry on local disk never pays its import time or memory.
"""

from __future__ import annotations

from gitreg.settings import Settings, s3_location
from gitreg.storage.blobs import BlobStore, FileBlobStore


def open_blob_store(settings: Settings) -> BlobStore:
    if not settings.blob_store:
        return FileBlobStore(settings.blob_dir)
    from gitreg.storage.s3 import S3BlobStore

    bucket, prefix = s3_location(settings.blob_store)
    # Uploads are hashed into local files first; the data dir is a per-replica
    # cache, so its `tmp` is the natural place for them.
    return S3BlobStore(bucket, prefix, settings.data_dir / "tmp", settings.s3_addressing)

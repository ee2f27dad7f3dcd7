"""Which `BlobStore` and `UploadStore` the settings ask for: local, or S3.

The S3 store (and its client library) is imported only when `blob_store` is an
`s3://` URL: a registry on local disk never pays its import time or memory.
"""

from __future__ import annotations

from gitreg.errors import ConfigError
from gitreg.settings import Settings, s3_location
from gitreg.storage.blobs import BlobStore, FileBlobStore
from gitreg.storage.staging import LocalUploadStore, UploadStore


def open_blob_store(settings: Settings) -> BlobStore:
    if not settings.blob_store:
        return FileBlobStore(settings.blob_dir)
    from gitreg.storage.s3 import S3BlobStore

    bucket, prefix = s3_location(settings.blob_store)
    # Uploads are hashed into local files first; the data dir is a per-replica
    # cache, so its `tmp` is the natural place for them.
    return S3BlobStore(bucket, prefix, settings.data_dir / "tmp", settings.s3_addressing)


def open_upload_store(settings: Settings, blobs: BlobStore) -> UploadStore:
    """Staged CI uploads beside the blobs: `DATA_DIR/uploads` on one machine, the
    blob store's bucket and prefix (through its client) when blobs are in S3, so
    every replica sees every upload."""
    if not settings.blob_store:
        return LocalUploadStore(settings.data_dir / "uploads")
    from gitreg.storage.s3 import S3BlobStore
    from gitreg.storage.s3_uploads import S3UploadStore

    if not isinstance(blobs, S3BlobStore):
        raise ConfigError(f"blob_store {settings.blob_store} is not open as an S3 store")
    return S3UploadStore(blobs)

"""Content-addressed blobs in S3 or any S3-compatible store (MinIO, Ceph, R2).

Objects are `PREFIX/blobs/<sha256[:2]>/<sha256>` in the bucket, with the
sha256 also as user metadata (`x-amz-meta-sha256`), so `aws s3 ls` and a
lifecycle rule read the same layout as `DATA_DIR/blobs/sha256/ab/...`.

The client is obstore (the Rust `object_store` crate), chosen by measurement
over boto3: docs/scale-out.md, "S3 client". It is imported here, and this module
only by `open_blob_store` when `blob_store` is an `s3://` URL, so a registry on
local disk never loads it (the 60 MiB per-worker budget).

Write-once: a writer hashes into a local scratch file, then uploads
with a conditional put (`If-None-Match: *`). When the object exists already
(another replica stored the same blob, or the endpoint cannot do conditional
puts), the existing object's bytes are hashed and must match: stored bytes are
never replaced, and a wrong object under a sha256 name is reported, not served
on. S3 checks each upload against the `x-amz-checksum-sha256` the client
sends; the size is checked after the upload.

Every failure of the client becomes `StorageUnavailable` (503 + Retry-After)
in `_s3_errors`, a panic inside it included; the client retries briefly itself,
so an outage answers within about a second.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import ipaddress
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, NotSupportedError, PreconditionError
from obstore.store import S3Store

from gitreg.errors import ConfigError, Conflict, NotFound, StorageUnavailable, storage_full
from gitreg.metrics import service as metrics
from gitreg.storage.blobs import (
    SHA256_RE,
    BlobCheck,
    BlobWriter,
    LocalScratch,
    StoredBlob,
    locked_temp_file,
    remove_if_unlocked,
)

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig, S3Config

log = logging.getLogger(__name__)

CHUNK = 1024 * 1024
# A conditional put is a single PUT, which the client holds in memory whole;
# larger blobs go up in 8 MiB parts after a check that the key is free.
SINGLE_PUT_MAX = 8 * 1024 * 1024
_KEYS = "blobs"


def s3_options(
    bucket: str, addressing: str, environ: Mapping[str, str]
) -> tuple[S3Config, ClientConfig, RetryConfig]:
    """Client settings from the standard AWS_* variables, and timeouts that make
    an outage a quick 503 rather than a request hanging for minutes. The client
    reads its other AWS_* variables itself (AWS_SESSION_TOKEN, and
    AWS_CONDITIONAL_PUT=disabled for an endpoint without conditional puts)."""
    # AWS_ENDPOINT is the client's own name for the same setting, which it would
    # otherwise read behind gitreg's back.
    endpoint = environ.get("AWS_ENDPOINT_URL") or environ.get("AWS_ENDPOINT") or ""
    if endpoint and not endpoint.startswith(("http://", "https://")):
        raise ConfigError(f"AWS_ENDPOINT_URL must be an http(s) URL, got {endpoint!r}")
    virtual = addressing == "virtual" and not _needs_path_style(endpoint)
    config: S3Config = {
        "region": environ.get("AWS_REGION") or "us-east-1",
        "checksum_algorithm": "sha256",
        "virtual_hosted_style_request": virtual,
    }
    if environ.get("AWS_ACCESS_KEY_ID"):
        config["access_key_id"] = environ["AWS_ACCESS_KEY_ID"]
        config["secret_access_key"] = environ.get("AWS_SECRET_ACCESS_KEY", "")
    if endpoint:
        # object_store takes a virtual-hosted endpoint with the bucket already in
        # its hostname; the AWS variable names the service, so add it.
        if virtual:
            scheme, _, rest = endpoint.partition("://")
            endpoint = f"{scheme}://{bucket}.{rest}"
        config["endpoint"] = endpoint.rstrip("/")
    client: ClientConfig = {
        "allow_http": endpoint.startswith("http://"),
        "connect_timeout": timedelta(seconds=5),
        # No overall deadline: a large download to a slow client takes long; a
        # stalled S3 connection is caught by the read timeout instead.
        "timeout": timedelta(hours=6),
        "read_timeout": timedelta(seconds=30),
    }
    retry: RetryConfig = {
        "max_retries": 2,
        "retry_timeout": timedelta(seconds=3),
        "backoff": {
            "init_backoff": timedelta(milliseconds=100),
            "max_backoff": timedelta(seconds=1),
        },
    }
    return config, client, retry


def _needs_path_style(endpoint: str) -> bool:
    """An endpoint at an IP address or `localhost` has no subdomains for a
    bucket to be one of: virtual-hosted requests to `BUCKET.127.0.0.1` cannot
    even be built (the client panics), so such endpoints are always path-style."""
    try:
        host = urlsplit(endpoint).hostname or ""
    except ValueError:  # an unbalanced IPv6 bracket: the client refuses it itself
        return False
    if host == "localhost":
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _client_failure(exc: BaseException) -> bool:
    """An error of S3, of the network or of the client. A panic inside the Rust
    client counts: pyo3 raises it as `PanicException`, which derives from
    BaseException (so `except Exception` lets it through) and cannot be
    imported by name (pyo3 creates the class when the first panic happens)."""
    if isinstance(exc, BaseError | OSError):
        return True
    kind = type(exc)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


def _reason(exc: BaseException) -> str:
    """The first line of a client error, for one log line or one message."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextlib.contextmanager
def _s3_errors(what: str) -> Iterator[None]:
    """The one place the client's failures become gitreg's: a missing object is
    `NotFound`; any other failure of S3, of the network or of the client itself
    (a panic included) is `StorageUnavailable`."""
    try:
        yield
    except FileNotFoundError as exc:
        raise NotFound("no such blob") from exc
    except BaseException as exc:
        if not _client_failure(exc):
            raise
        # The caller logs the failing operation once, with this reason.
        log.debug("S3 %s failed: %s", what, _reason(exc))
        raise StorageUnavailable(f"blob store unavailable ({what})", reason=_reason(exc)) from exc


class S3BlobStore(LocalScratch):
    """Blobs in `s3://bucket/prefix`; scratch space and writer temp files in the
    local directory `scratch` (under the data dir: a per-replica cache)."""

    def __init__(
        self,
        bucket: str,
        prefix: str,
        scratch: Path,
        addressing: str = "virtual",
        environ: Mapping[str, str] | None = None,
    ) -> None:
        config, client, retry = s3_options(bucket, addressing, environ or os.environ)
        self.bucket = bucket
        try:
            self._store = S3Store(
                bucket,
                prefix=prefix or None,
                config=config,
                client_options=client,
                retry_config=retry,
            )
        except BaseException as exc:
            if not (_client_failure(exc) or isinstance(exc, ValueError)):
                raise
            raise ConfigError(f"blob_store s3://{bucket}: {_reason(exc)}") from exc
        self._tmp = scratch
        self._tmp.mkdir(parents=True, exist_ok=True)

    @property
    def client(self) -> S3Store:
        """The bucket under this store's prefix, for the staged uploads kept
        beside the blobs (gitreg/storage/s3_uploads.py): one client, one setup."""
        return self._store

    @property
    def temp_dir(self) -> Path:
        """The local directory of this replica's temp and scratch files."""
        return self._tmp

    def _key(self, sha256: str) -> str:
        if not SHA256_RE.match(sha256):
            raise NotFound("no such blob")
        return f"{_KEYS}/{sha256[:2]}/{sha256}"

    def _head(self, sha256: str) -> int | None:
        """The stored object's size, or None when there is none."""
        key = self._key(sha256)
        with _s3_errors("head"):
            try:
                return int(obstore.head(self._store, key)["size"])
            except FileNotFoundError:
                return None

    def exists(self, sha256: str) -> bool:
        return SHA256_RE.match(sha256) is not None and self._head(sha256) is not None

    def stat(self, sha256: str) -> StoredBlob:
        size = self._head(sha256)
        if size is None:
            raise NotFound("no such blob")
        return StoredBlob(sha256, size)

    def open(self, sha256: str) -> BinaryIO:
        key = self._key(sha256)
        with _s3_errors("read"):
            result = obstore.get(self._store, key)
            size = int(result.meta["size"])
            chunks = iter(result.stream(min_chunk_size=CHUNK))
        return io.BufferedReader(_ObjectReader(chunks, size), CHUNK)

    def delete(self, sha256: str) -> bool:
        if not SHA256_RE.match(sha256) or self._head(sha256) is None:
            return False
        with _s3_errors("delete"):
            obstore.delete(self._store, self._key(sha256))
        return True

    def local_file(self, sha256: str) -> Path | None:
        self._key(sha256)  # NotFound for a malformed name, as the protocol says
        return None

    def names(self) -> Iterator[str]:
        with _s3_errors("list"):
            for batch in obstore.list(self._store, f"{_KEYS}/", chunk_size=1000):
                for meta in batch:
                    name = meta["path"].rsplit("/", 1)[-1]
                    if SHA256_RE.match(name) and meta["path"] == f"{_KEYS}/{name[:2]}/{name}":
                        yield name

    def presigned_url(self, sha256: str, ttl: float) -> str | None:
        key = self._key(sha256)
        with _s3_errors("sign"):
            return obstore.sign(self._store, "GET", key, timedelta(seconds=ttl))

    def check_writable(self, probe_bytes: int = 0) -> None:
        """A local scratch write (uploads are staged there), then an S3 put and
        delete of a probe object; any failure as `OSError`, as the protocol says."""
        with tempfile.TemporaryFile(dir=self._tmp) as probe:
            probe.write(b"\0" * probe_bytes)
            probe.flush()
            os.fsync(probe.fileno())
        key = f"probes/{uuid.uuid4().hex}"
        try:
            obstore.put(self._store, key, b"\0" * probe_bytes, use_multipart=False)
            obstore.delete(self._store, key)
        except BaseException as exc:
            if not _client_failure(exc):
                raise
            raise OSError(errno.EIO, f"S3 bucket {self.bucket}: {_reason(exc)}") from exc

    @contextlib.contextmanager
    def writer(self, check: BlobCheck | None = None) -> Iterator[BlobWriter]:
        """Hash into a locked local temp file; on a clean exit (and `check`
        passing on that file) upload it write-once."""
        fd, tmp = locked_temp_file(self._tmp)
        try:
            with os.fdopen(fd, "wb") as raw:
                sink = BlobWriter(raw)
                try:
                    yield sink
                    raw.flush()
                except OSError as exc:
                    if (full := storage_full(exc, str(self._tmp))) is not None:
                        raise full from exc
                    raise
                stored = sink.digest()
                if check is not None:
                    check(tmp, stored)
                self._upload(tmp, stored)
            sink.result = stored
            metrics.blob_written(stored.size)
        finally:
            tmp.unlink(missing_ok=True)

    def _upload(self, path: Path, stored: StoredBlob) -> None:
        key = self._key(stored.sha256)
        attributes = {"sha256": stored.sha256}
        with _s3_errors("upload"):
            if stored.size <= SINGLE_PUT_MAX:
                try:
                    obstore.put(self._store, key, path, mode="create", attributes=attributes)
                except (AlreadyExistsError, PreconditionError):
                    self._check_existing(stored)
                    return
                except (NotSupportedError, NotImplementedError):
                    # Conditional puts turned off (AWS_CONDITIONAL_PUT=disabled, for
                    # an endpoint without If-None-Match): check, then put.
                    if self._head(stored.sha256) is not None:
                        self._check_existing(stored)
                        return
                    obstore.put(self._store, key, path, attributes=attributes)
            elif self._head(stored.sha256) is not None:
                self._check_existing(stored)
                return
            else:
                # Two replicas racing here upload the same bytes (same sha256,
                # each hashed locally), so the second put changes nothing.
                obstore.put(self._store, key, path, attributes=attributes, chunk_size=CHUNK * 8)
        size = self._head(stored.sha256)
        if size != stored.size:
            raise StorageUnavailable(
                f"blob {stored.sha256}: S3 holds {size} bytes after an upload of {stored.size}"
            )

    def _check_existing(self, stored: StoredBlob) -> None:
        """The object already under `stored`'s name must hold its bytes: hash it."""
        digest = hashlib.sha256()
        size = 0
        with self.open(stored.sha256) as existing:
            while chunk := existing.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
        if digest.hexdigest() != stored.sha256 or size != stored.size:
            log.error("S3 object for blob %s holds other bytes; not replaced", stored.sha256)
            raise Conflict(
                f"blob {stored.sha256}: the object stored under this name holds other "
                f"bytes (sha256 {digest.hexdigest()}); it was not replaced, remove it"
            )

    def put_bytes(self, data: bytes) -> StoredBlob:
        with self.writer() as sink:
            sink.write(data)
        assert sink.result is not None
        return sink.result

    def backup(self, dest: Path) -> int:
        """Download the blobs `dest` lacks into `dest/sha256/ab/...`, the layout a
        `FileBlobStore` at `dest` serves."""
        copied = 0
        for sha256 in self.names():
            target = dest / "sha256" / sha256[:2] / sha256
            if target.is_file() and target.stat().st_size == self.stat(sha256).size:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".backup-")
            try:
                with os.fdopen(fd, "wb") as out, self.open(sha256) as blob:
                    while chunk := blob.read(CHUNK):
                        out.write(chunk)
                os.chmod(tmp, 0o644)
                os.replace(tmp, target)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            copied += 1
        return copied

    def remove_stale_temp_files(self, older_than: float = 3600.0) -> int:
        """Writer temp files a crash left behind, unless a live writer holds them."""
        count = 0
        cutoff = time.time() - older_than
        for leftover in self._tmp.glob("blob-*"):
            with contextlib.suppress(OSError):
                if leftover.stat().st_mtime < cutoff and remove_if_unlocked(leftover):
                    count += 1
        return count


class _ObjectReader(io.RawIOBase):
    """A GET's body as a file, read as it arrives (never whole in memory). A
    failure or a body shorter than the object raises `StorageUnavailable`, so a
    reader never takes a cut-off body for the whole blob."""

    def __init__(self, chunks: Iterator[Any], size: int) -> None:
        self._chunks = chunks
        self._size = size
        self._seen = 0
        self._pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            with _s3_errors("read"):
                chunk = next(self._chunks, None)
            if chunk is None:
                if self._seen != self._size:
                    raise StorageUnavailable(f"blob store sent {self._seen} of {self._size} bytes")
                return 0
            self._pending = memoryview(chunk)
            self._seen += len(self._pending)
        count = min(len(buffer), len(self._pending))
        buffer[:count] = self._pending[:count]
        self._pending = self._pending[count:]
        return count

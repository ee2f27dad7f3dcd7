"""The S3 blob store beyond the shared contract: write-once across writers, a
wrong object under a sha256 name, an outage and its end, the object layout, and
that a registry on local disk never loads the S3 client.

Against moto's S3 server on 127.0.0.1 (tests/support/s3.py), through obstore.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import obstore
import pytest
from obstore.store import S3Store

from gitreg.errors import ConfigError, Conflict, NotFound, StorageUnavailable
from gitreg.settings import load_settings
from gitreg.storage.blobs import BlobStore, FileBlobStore
from gitreg.storage.s3 import s3_options
from gitreg.storage.select import open_blob_store
from tests.support.s3 import MotoS3, S3Bucket, moto_s3, new_bucket

if TYPE_CHECKING:
    # Declared only in obstore's type stubs, not importable at run time.
    from obstore.store import S3Config

DATA = b"terraform module archive"
SHA = hashlib.sha256(DATA).hexdigest()
KEY = f"registry/one/blobs/{SHA[:2]}/{SHA}"
_CREDENTIALS: S3Config = {
    "access_key_id": "testing",
    "secret_access_key": "testing",
    "region": "us-east-1",
}


def _store(bucket: S3Bucket, data_dir: Path) -> BlobStore:
    settings = load_settings(
        {"data_dir": data_dir, "blob_store": bucket.url},
        environ={"GITREG_S3_ADDRESSING": "path"},
    )
    return open_blob_store(settings)


def _raw(bucket: S3Bucket) -> S3Store:
    """The bucket through the client itself, around gitreg: to seed or read objects."""
    return S3Store(
        bucket.bucket,
        config={"endpoint": bucket.moto.endpoint, **_CREDENTIALS},
        client_options={"allow_http": True},
    )


def test_blobs_are_stored_under_prefix_blobs_ab_sha256(s3: S3Bucket, tmp_path: Path) -> None:
    _store(s3, tmp_path).put_bytes(DATA)
    stored = obstore.get(_raw(s3), KEY)
    assert stored.bytes() == DATA
    assert stored.attributes["sha256"] == SHA  # x-amz-meta-sha256


@pytest.fixture(params=["conditional put", "check then put"])
def put_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a write stays write-once: `If-None-Match: *`, or, for an endpoint
    without it (AWS_CONDITIONAL_PUT=disabled), a check of the key before the put."""
    if request.param == "check then put":
        monkeypatch.setenv("AWS_CONDITIONAL_PUT", "disabled")
    return str(request.param)


def test_a_second_writer_of_the_same_bytes_keeps_the_first_object(
    s3: S3Bucket, tmp_path: Path, put_mode: str
) -> None:
    # The first writer's object carries a marker of its own; one replaced by a
    # later PUT would not.
    obstore.put(_raw(s3), KEY, DATA, attributes={"sha256": SHA, "writer": "first"})
    first, second = _store(s3, tmp_path / "one"), _store(s3, tmp_path / "two")
    assert first.put_bytes(DATA).sha256 == SHA
    with second.writer() as sink:
        sink.write(DATA)
    assert sink.result is not None and sink.result.sha256 == SHA
    kept = obstore.get(_raw(s3), KEY)
    assert kept.attributes.get("writer") == "first"
    assert kept.bytes() == DATA


@pytest.mark.parametrize("size", [len(DATA), 9 * 1024 * 1024])
def test_an_object_with_wrong_bytes_under_a_sha256_name_is_detected_and_kept(
    s3: S3Bucket, tmp_path: Path, size: int, put_mode: str
) -> None:
    # Both upload paths: a conditional put, and (over 8 MiB) check-then-multipart.
    data = (DATA * (size // len(DATA) + 1))[:size]
    key = f"registry/one/blobs/{hashlib.sha256(data).hexdigest()[:2]}/"
    key += hashlib.sha256(data).hexdigest()
    obstore.put(_raw(s3), key, b"not the bytes this name promises")
    blobs = _store(s3, tmp_path)
    with pytest.raises(Conflict, match="holds other bytes"):
        blobs.put_bytes(data)
    assert obstore.get(_raw(s3), key).bytes() == b"not the bytes this name promises"
    assert not list((tmp_path / "tmp").glob("blob-*"))  # the writer's temp file is gone


def test_a_failed_write_leaves_no_object_and_no_temp_file(s3: S3Bucket, tmp_path: Path) -> None:
    blobs = _store(s3, tmp_path)
    with pytest.raises(RuntimeError), blobs.writer() as sink:
        sink.write(DATA)
        raise RuntimeError("boom")
    assert list(blobs.names()) == []
    assert not list((tmp_path / "tmp").glob("blob-*"))


def test_backup_lays_blobs_out_as_a_file_store_serves_them(s3: S3Bucket, tmp_path: Path) -> None:
    blobs = _store(s3, tmp_path / "data")
    blobs.put_bytes(DATA)
    assert blobs.backup(tmp_path / "copy") == 1
    with FileBlobStore(tmp_path / "copy").open(SHA) as copied:
        assert copied.read() == DATA


@pytest.fixture
def outage() -> Iterator[MotoS3]:
    """A moto server of this test's own, which the test may stop and restart."""
    moto = moto_s3()
    yield moto
    moto.stop()


def test_an_outage_is_storage_unavailable_and_ends_by_itself(
    outage: MotoS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blobs = _store(new_bucket(outage, monkeypatch), tmp_path)
    blobs.put_bytes(DATA)
    outage.stop()
    for call in (
        lambda: blobs.stat(SHA),
        lambda: blobs.open(SHA),
        lambda: blobs.exists(SHA),
        lambda: blobs.put_bytes(b"new"),
        lambda: list(blobs.names()),
    ):
        with pytest.raises(StorageUnavailable) as caught:
            call()
        assert caught.value.status == 503 and caught.value.retry_after > 0
    with pytest.raises(OSError, match="S3 bucket"):  # /readyz: "blob store not writable"
        blobs.check_writable(1024)
    outage.start()
    with blobs.open(SHA) as stored:
        assert stored.read() == DATA
    blobs.check_writable(1024)
    with pytest.raises(NotFound):
        blobs.stat(hashlib.sha256(b"never stored").hexdigest())


def test_a_registry_on_local_disk_never_imports_the_s3_client(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from gitreg.app import create_app\n"
        "from gitreg.settings import load_settings\n"
        f"create_app(load_settings({{'data_dir': {str(tmp_path)!r}}}, environ={{}}))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('obstore', 'gitreg.storage.s3'))))\n"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


def test_the_endpoint_and_addressing_come_from_the_aws_variables() -> None:
    env = {"AWS_ENDPOINT_URL": "https://minio.example:9000/", "AWS_REGION": "eu-west-3"}
    config, client, _ = s3_options("bucket", "path", env)
    assert config["endpoint"] == "https://minio.example:9000"
    assert (config["region"], config["virtual_hosted_style_request"]) == ("eu-west-3", False)
    assert client["allow_http"] is False
    config, _, _ = s3_options("bucket", "virtual", env)
    assert config["endpoint"] == "https://bucket.minio.example:9000"  # BUCKET.host
    assert config["virtual_hosted_style_request"] is True
    with pytest.raises(ConfigError, match="AWS_ENDPOINT_URL must be an http"):
        s3_options("bucket", "path", {"AWS_ENDPOINT_URL": "minio:9000"})


def test_scratch_space_and_crashed_writers_temp_files_stay_local(
    s3: S3Bucket, tmp_path: Path
) -> None:
    blobs = _store(s3, tmp_path)
    with blobs.scratch_file("blob-mirror-") as scratch:
        assert scratch.parent == tmp_path / "tmp"
    old, fresh = tmp_path / "tmp" / "blob-old", tmp_path / "tmp" / "blob-fresh"
    old.write_bytes(b"x")
    fresh.write_bytes(b"y")
    past = time.time() - 7200
    os.utime(old, (past, past))
    assert blobs.remove_stale_temp_files() == 1
    assert fresh.exists() and not old.exists()

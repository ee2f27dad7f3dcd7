"""Staged CI uploads (`UploadStore`, gitreg/storage/staging.py) on local disk and
in S3, and what replicas sharing one bucket need of them: an upload
created on one replica takes files on another and is published from a third;
the staging quotas count what every replica staged; stale uploads are removed
by whichever replica's cleaner runs.

S3 is moto's server on 127.0.0.1 through the real client (tests/support/s3.py).
Each "replica" is a store opened from its own data dir, as `gitreg serve` opens it.
"""

from __future__ import annotations

import fcntl
import time
from pathlib import Path

import obstore
import pytest
from obstore.store import S3Store

from gitreg.addresses import local_provider_address
from gitreg.errors import NotFound, PayloadTooLarge
from gitreg.providers.uploads import Upload, UploadStaging
from gitreg.settings import load_settings
from gitreg.storage.index import SQLiteIndex
from gitreg.storage.s3 import S3BlobStore
from gitreg.storage.s3_uploads import S3UploadStore
from gitreg.storage.select import open_blob_store, open_upload_store
from gitreg.storage.staged_bytes import StagedBytesStore
from gitreg.storage.staging import UploadStore
from tests.support.s3 import S3Bucket

KIB = 1024
ZIP = "terraform-provider-null_1.0.0_linux_amd64.zip"
OTHER_ZIP = "terraform-provider-null_1.0.0_darwin_arm64.zip"
CAP = 1024 * KIB  # the largest file a test stages
SUMS = "terraform-provider-null_1.0.0_SHA256SUMS"
ADDRESS = local_provider_address("acme", "null")


def _replica(data_dir: Path, bucket: S3Bucket | None) -> UploadStore:
    """The upload store a `gitreg serve` with this data dir (and bucket) uses."""
    config: dict[str, object] = {"data_dir": data_dir}
    if bucket is not None:
        config["blob_store"] = bucket.url
    settings = load_settings(config, environ={"GITREG_S3_ADDRESSING": "path"})
    return open_upload_store(settings, open_blob_store(settings))


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> UploadStore:
    bucket = request.getfixturevalue("s3") if request.param == "s3" else None
    return _replica(tmp_path / "data", bucket)


def _stage(store: UploadStore, upload_id: str, filename: str, data: bytes) -> None:
    incoming = store.receive(upload_id, filename)
    incoming.write(data)
    incoming.commit()


def test_an_upload_keeps_its_metadata_and_files_until_removed(store: UploadStore) -> None:
    upload = store.create({"provider": ADDRESS.key, "version": "1.0.0", "token": 7})
    assert store.meta(upload) == {"provider": ADDRESS.key, "version": "1.0.0", "token": 7}
    _stage(store, upload, ZIP, b"z" * 10)
    _stage(store, upload, SUMS, b"sums")
    _stage(store, upload, SUMS, b"sums, again")  # a PUT repeated replaces the file
    with store.local_files(upload) as paths:
        assert {p.name: p.read_bytes() for p in paths} == {ZIP: b"z" * 10, SUMS: b"sums, again"}
    [staged] = store.uploads()
    assert (staged.upload_id, staged.token) == (upload, 7)
    assert staged.size >= 10 + len(b"sums, again")
    store.remove(upload)
    assert store.meta(upload) is None
    assert store.uploads() == []
    store.remove(upload)  # idempotent


def test_unknown_and_malformed_ids_are_no_upload(store: UploadStore) -> None:
    assert store.meta("A" * 22) is None
    assert store.meta("../../etc/passwd") is None
    with pytest.raises(NotFound):
        store.receive("../x", ZIP)


def test_a_file_being_received_counts_but_is_not_there_until_committed(
    store: UploadStore,
) -> None:
    upload = store.create({"provider": ADDRESS.key, "version": "1.0.0", "token": 1})
    incoming = store.receive(upload, ZIP)
    incoming.write(b"x" * (32 * KIB))
    [staged] = store.uploads()
    assert staged.size >= 32 * KIB  # parallel PUTs cannot each use the whole quota
    with store.local_files(upload) as paths:
        assert paths == []
    incoming.abort()  # a cut connection
    with store.local_files(upload) as paths:
        assert paths == []
    [staged] = store.uploads()
    assert staged.size < 32 * KIB


def _s3_store(data_dir: Path, bucket: S3Bucket, clock: float = 0.0) -> S3UploadStore:
    """A replica's S3 store whose clock runs `clock` seconds ahead."""
    settings = load_settings(
        {"data_dir": data_dir, "blob_store": bucket.url}, environ={"GITREG_S3_ADDRESSING": "path"}
    )
    blobs = open_blob_store(settings)
    assert isinstance(blobs, S3BlobStore)
    return S3UploadStore(blobs, clock=lambda: time.time() + clock)


def test_s3_uploads_live_under_prefix_uploads_and_are_shared_by_replicas(
    s3: S3Bucket, tmp_path: Path
) -> None:
    one, two, three = (_replica(tmp_path / f"replica-{n}", s3) for n in range(3))
    upload = one.create({"provider": ADDRESS.key, "version": "1.0.0", "token": 3})
    _stage(two, upload, ZIP, b"zip bytes")
    _stage(one, upload, SUMS, b"sums")
    raw = S3Store(
        s3.bucket,
        config={
            "endpoint": s3.moto.endpoint,
            "access_key_id": "testing",
            "secret_access_key": "testing",
            "region": "us-east-1",
        },
        client_options={"allow_http": True},
    )
    keys = sorted(m["path"] for batch in obstore.list(raw, "registry/one/uploads/") for m in batch)
    assert keys == [f"registry/one/uploads/{upload}/{name}" for name in (".upload.json", SUMS, ZIP)]
    with three.local_files(upload) as paths:
        assert {p.name: p.read_bytes() for p in paths} == {ZIP: b"zip bytes", SUMS: b"sums"}
        assert all(p.is_relative_to(tmp_path / "replica-2") for p in paths)  # its scratch
    three.remove(upload)
    assert one.meta(upload) is None and two.uploads() == []
    assert not list((tmp_path / "replica-1").rglob("upload-*"))  # no temp file left


def _staging(store: UploadStore, index: Path) -> UploadStaging:
    """A replica's staging: its own store, and its own engine on the shared index."""
    ledger = StagedBytesStore(SQLiteIndex(index))
    return UploadStaging(store, ledger, per_token=100 * KIB, total=160 * KIB)


def _put(staging: UploadStaging, upload: Upload, name: str, size: int) -> None:
    reservation = staging.reserve(upload, name, size, CAP)
    incoming = staging.receive(upload, name)
    staging.write(incoming, reservation, b"b" * size, size)
    staging.commit(incoming, reservation, size)


def test_quotas_count_what_every_replica_staged(s3: S3Bucket, tmp_path: Path) -> None:
    index = tmp_path / "index.sqlite3"
    a, b = (_staging(_replica(tmp_path / f"replica-{n}", s3), index) for n in range(2))
    first = a.open(a.create(ADDRESS, "1.0.0", token_id=1), ADDRESS, "1.0.0")
    _put(b, first, ZIP, 64 * KIB)
    # The same token's second upload, on the other replica, shares its quota.
    second = b.open(b.create(ADDRESS, "1.0.0", token_id=1), ADDRESS, "1.0.0")
    with pytest.raises(PayloadTooLarge, match="max_staged_bytes_per_token"):
        a.reserve(second, ZIP, 64 * KIB, CAP)
    # Another token has its own quota, but everyone shares the total.
    other = a.open(a.create(ADDRESS, "1.0.0", token_id=2), ADDRESS, "1.0.0")
    _put(a, other, ZIP, 64 * KIB)
    third = b.open(b.create(ADDRESS, "1.0.0", token_id=3), ADDRESS, "1.0.0")
    with pytest.raises(PayloadTooLarge, match="max_staged_bytes "):
        b.reserve(third, ZIP, 64 * KIB, CAP)
    # Publishing (or removing) an upload frees what it held.
    a.remove(first)
    _put(b, third, ZIP, 64 * KIB)


def test_a_body_of_unknown_size_is_cut_off_when_another_replica_took_the_room(
    s3: S3Bucket, tmp_path: Path
) -> None:
    index = tmp_path / "index.sqlite3"
    a, b = (_staging(_replica(tmp_path / f"replica-{n}", s3), index) for n in range(2))
    upload = a.open(a.create(ADDRESS, "1.0.0", token_id=1), ADDRESS, "1.0.0")
    # Replica a receives a file with no Content-Length; meanwhile replica b
    # stores 64 KiB for the same token; a's next bytes no longer fit.
    reservation = a.reserve(upload, ZIP, 0, CAP)
    incoming = a.receive(upload, ZIP)
    a.write(incoming, reservation, b"a" * (16 * KIB), 16 * KIB)
    _put(b, upload, OTHER_ZIP, 64 * KIB)
    with pytest.raises(PayloadTooLarge, match="max_staged_bytes_per_token"):
        a.write(incoming, reservation, b"a" * (32 * KIB), 48 * KIB)
    a.abort(incoming, reservation)
    with b.local_files(upload) as paths:
        assert [p.name for p in paths] == [OTHER_ZIP]  # a's file was not stored
    assert not list((tmp_path / "replica-0").rglob("upload-*"))
    _put(b, upload, ZIP, 36 * KIB)  # what a held was released


def test_stale_uploads_are_removed_by_any_replicas_cleaner(s3: S3Bucket, tmp_path: Path) -> None:
    writer = _s3_store(tmp_path / "replica-0", s3)
    idle = writer.create({"provider": ADDRESS.key, "version": "1.0.0", "token": 1})
    _stage(writer, idle, ZIP, b"z")
    busy = writer.create({"provider": ADDRESS.key, "version": "1.0.0", "token": 1})
    # Another replica, two hours later, with a one-hour staging_ttl.
    later = _s3_store(tmp_path / "replica-1", s3, clock=7200)
    receiving = later.receive(busy, ZIP)  # a PUT to `busy` is arriving there
    receiving.write(b"still coming")
    leftover = later.blobs.temp_dir / "upload-left-by-a-crash"
    leftover.write_bytes(b"x")
    with (later.blobs.temp_dir / "upload-held").open("wb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # as a live receive holds its file
        assert _s3_store(tmp_path / "replica-2", s3).remove_stale(3600) == 0  # now: all fresh
        assert later.remove_stale(3600) == 1
        assert (later.blobs.temp_dir / "upload-held").exists()
    assert writer.meta(idle) is None and writer.meta(busy) is not None
    assert not leftover.exists()
    receiving.commit()
    with writer.local_files(busy) as paths:
        assert [p.read_bytes() for p in paths] == [b"still coming"]

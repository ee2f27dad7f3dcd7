"""Contract: the content-addressed, write-once blob store (BlobStore)."""

from __future__ import annotations

import hashlib
import os
import urllib.request
from pathlib import Path

import pytest

from gitreg.errors import NotFound, VerificationError
from gitreg.storage.blobs import BlobStore, StoredBlob

DATA = b"terraform module archive"
SHA = hashlib.sha256(DATA).hexdigest()


def test_write_read_round_trip(blobs: BlobStore) -> None:
    with blobs.writer() as sink:
        sink.write(DATA[:5])
        sink.write(DATA[5:])
    assert sink.result is not None and sink.result.sha256 == SHA
    assert blobs.exists(SHA)
    with blobs.open(SHA) as stored:
        assert stored.read() == DATA
    assert blobs.stat(SHA).size == len(DATA)


def test_the_same_bytes_twice_are_stored_once(blobs: BlobStore) -> None:
    first = blobs.put_bytes(DATA)
    assert blobs.put_bytes(DATA) == first
    with blobs.open(SHA) as stored:
        assert stored.read() == DATA


def test_a_failed_write_stores_nothing(blobs: BlobStore) -> None:
    with pytest.raises(RuntimeError), blobs.writer() as sink:
        sink.write(DATA)
        raise RuntimeError("boom")
    assert not blobs.exists(SHA)


def test_a_check_sees_every_byte_before_the_blob_is_stored(blobs: BlobStore) -> None:
    seen: list[tuple[bytes, str, int, bool]] = []

    def check(path: Path, blob: StoredBlob) -> None:
        seen.append((path.read_bytes(), blob.sha256, blob.size, blobs.exists(SHA)))

    with blobs.writer(check) as sink:
        sink.write(DATA[:7])
        sink.write(DATA[7:])
    assert seen == [(DATA, SHA, len(DATA), False)]
    assert sink.result is not None and sink.result.sha256 == SHA
    with blobs.open(SHA) as stored:
        assert stored.read() == DATA


def test_a_refusing_check_stores_nothing_and_leaves_no_temp_file(
    blobs: BlobStore, tmp_path: Path
) -> None:
    def refuse(path: Path, blob: StoredBlob) -> None:
        raise VerificationError(f"{blob.sha256} refused")

    with pytest.raises(VerificationError, match=SHA), blobs.writer(refuse) as sink:
        sink.write(DATA)
    assert sink.result is None
    assert not blobs.exists(SHA)
    assert list(blobs.names()) == []
    assert [p for p in tmp_path.rglob("*") if p.is_file() and "tmp" in p.parts] == []


def test_a_reader_fd_sees_each_write_at_once_and_outlives_the_writer(blobs: BlobStore) -> None:
    """The mirror streams a cold miss from the temp file as it fills."""
    with blobs.writer() as sink:
        sink.write(DATA[:3])
        fd = sink.reader_fd()
        try:
            sink.write(DATA[3:9])  # small writes: never left in a user-space buffer
            assert os.pread(fd, 100, 0) == DATA[:9]
            sink.write(DATA[9:])
        except BaseException:
            os.close(fd)
            raise
    try:
        assert os.pread(fd, 100, 0) == DATA  # stored (renamed or uploaded) meanwhile
    finally:
        os.close(fd)
    with blobs.open(SHA) as stored:
        assert stored.read() == DATA


def test_missing_and_malformed_blobs(blobs: BlobStore) -> None:
    assert not blobs.exists(SHA)
    assert not blobs.exists("../etc/passwd")
    with pytest.raises(NotFound):
        blobs.stat(SHA)
    with pytest.raises(NotFound):
        blobs.open(SHA)


def test_delete_is_idempotent(blobs: BlobStore) -> None:
    blobs.put_bytes(DATA)
    assert blobs.delete(SHA) is True
    assert not blobs.exists(SHA)
    assert blobs.delete(SHA) is False


def test_scratch_space_is_removed_on_exit(blobs: BlobStore) -> None:
    with blobs.scratch_dir("test-") as directory, blobs.scratch_file("test-") as file:
        (directory / "unpacked").write_bytes(DATA)
        file.write_bytes(DATA)
    assert not directory.exists() and not file.exists()
    blobs.check_writable(probe_bytes=1024)


def test_backup_copies_only_what_the_destination_lacks(blobs: BlobStore, tmp_path: Path) -> None:
    blobs.put_bytes(DATA)
    assert blobs.backup(tmp_path / "copy") == 1
    assert blobs.backup(tmp_path / "copy") == 0


def test_names_lists_every_stored_blob(blobs: BlobStore) -> None:
    assert list(blobs.names()) == []
    other = blobs.put_bytes(b"another blob").sha256
    blobs.put_bytes(DATA)
    assert sorted(blobs.names()) == sorted([SHA, other])


def test_a_blob_larger_than_one_upload_part_streams_back_whole(blobs: BlobStore) -> None:
    # 20 MiB: past S3's single-put limit (SINGLE_PUT_MAX), so a multipart
    # upload, and read back in pieces as open() streams it.
    data = hashlib.sha256(b"seed").digest() * (20 * 1024 * 1024 // 32) + b"tail"
    with blobs.writer() as sink:
        for start in range(0, len(data), 3 * 1024 * 1024):
            sink.write(data[start : start + 3 * 1024 * 1024])
    assert sink.result is not None
    assert blobs.stat(sink.result.sha256).size == len(data)
    digest = hashlib.sha256()
    with blobs.open(sink.result.sha256) as stored:
        while chunk := stored.read(1024 * 1024):
            digest.update(chunk)
    assert digest.hexdigest() == sink.result.sha256 == hashlib.sha256(data).hexdigest()
    assert blobs.put_bytes(data) == sink.result  # the same bytes again: kept as is


def test_local_file_or_presigned_url_serves_the_bytes(blobs: BlobStore) -> None:
    blobs.put_bytes(DATA)
    path = blobs.local_file(SHA)
    url = blobs.presigned_url(SHA, 60)
    # Exactly one way to reach the bytes without gitreg's stream: a local file
    # (disk) or a presigned URL (S3).
    assert (path is None) != (url is None)
    if path is not None:
        assert path.read_bytes() == DATA
    else:
        assert url is not None
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.read() == DATA
    with pytest.raises(NotFound):
        blobs.local_file("../etc/passwd")

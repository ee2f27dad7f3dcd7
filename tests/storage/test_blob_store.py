"""Contract: the content-addressed, write-once blob store (BlobStore, S2, H2)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gitreg.errors import NotFound
from tests.storage.conftest import Backend

DATA = b"terraform module archive"
SHA = hashlib.sha256(DATA).hexdigest()


def test_write_read_round_trip(implementation: Backend) -> None:
    blobs = implementation.blobs
    with blobs.writer() as sink:
        sink.write(DATA[:5])
        sink.write(DATA[5:])
    assert sink.result is not None and sink.result.sha256 == SHA
    assert blobs.exists(SHA)
    with blobs.open(SHA) as stored:
        assert stored.read() == DATA
    assert blobs.stat(SHA).size == len(DATA)


def test_the_same_bytes_twice_are_stored_once(implementation: Backend) -> None:
    blobs = implementation.blobs
    first = blobs.put_bytes(DATA)
    assert blobs.put_bytes(DATA) == first
    with blobs.open(SHA) as stored:
        assert stored.read() == DATA


def test_a_failed_write_stores_nothing(implementation: Backend) -> None:
    blobs = implementation.blobs
    with pytest.raises(RuntimeError), blobs.writer() as sink:
        sink.write(DATA)
        raise RuntimeError("boom")
    assert not blobs.exists(SHA)


def test_missing_and_malformed_blobs(implementation: Backend) -> None:
    blobs = implementation.blobs
    assert not blobs.exists(SHA)
    assert not blobs.exists("../etc/passwd")
    with pytest.raises(NotFound):
        blobs.stat(SHA)
    with pytest.raises(NotFound):
        blobs.open(SHA)


def test_delete_is_idempotent(implementation: Backend) -> None:
    blobs = implementation.blobs
    blobs.put_bytes(DATA)
    assert blobs.delete(SHA) is True
    assert not blobs.exists(SHA)
    assert blobs.delete(SHA) is False


def test_scratch_space_is_removed_on_exit(implementation: Backend) -> None:
    blobs = implementation.blobs
    with blobs.scratch_dir("test-") as directory, blobs.scratch_file("test-") as file:
        (directory / "unpacked").write_bytes(DATA)
        file.write_bytes(DATA)
    assert not directory.exists() and not file.exists()
    blobs.check_writable(probe_bytes=1024)


def test_backup_copies_only_what_the_destination_lacks(
    implementation: Backend, tmp_path: Path
) -> None:
    blobs = implementation.blobs
    blobs.put_bytes(DATA)
    assert blobs.backup(tmp_path / "copy") == 1
    assert blobs.backup(tmp_path / "copy") == 0

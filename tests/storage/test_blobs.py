"""The content-addressed blob store."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from gitreg.errors import NotFound
from gitreg.storage.blobs import FileBlobStore


def test_put_stores_under_sha256(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path)
    stored = store.put_bytes(b"hello")
    assert stored.sha256 == hashlib.sha256(b"hello").hexdigest()
    assert store.path(stored.sha256).read_bytes() == b"hello"
    assert stored.size == 5


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path)
    with pytest.raises(RuntimeError), store.writer() as sink:
        sink.write(b"partial")
        raise RuntimeError("boom")
    assert not list((tmp_path / "tmp").iterdir())
    assert not list((tmp_path / "sha256").rglob("*"))


def test_same_bytes_twice_is_one_blob(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path)
    assert store.put_bytes(b"x") == store.put_bytes(b"x")
    assert len([p for p in (tmp_path / "sha256").rglob("*") if p.is_file()]) == 1


@pytest.mark.parametrize("name", ["../../etc/passwd", "ABC", "0" * 63, "g" * 64])
def test_non_sha_names_are_not_found(tmp_path: Path, name: str) -> None:
    store = FileBlobStore(tmp_path)
    assert not store.exists(name)
    with pytest.raises(NotFound):
        store.path(name)


def test_only_old_temp_files_are_cleaned(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path)
    old = tmp_path / "tmp" / "blob-old"
    fresh = tmp_path / "tmp" / "blob-fresh"
    old.write_bytes(b"x")
    fresh.write_bytes(b"y")
    past = time.time() - 7200
    os.utime(old, (past, past))
    assert store.remove_stale_temp_files() == 1
    assert fresh.exists() and not old.exists()

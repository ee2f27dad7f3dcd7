"""A store that fails in the middle of a blob's body, remote (S3,
gitreg/api/blobs.py) or a local file (gitreg/api/blob_file.py): the download is
cut with ResponseCut after one logged error, not an OSError that the app and
uvicorn would each log with a traceback."""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path
from typing import BinaryIO, cast

import anyio
import pytest

from gitreg.api import blob_file
from gitreg.api.blob_file import PageCacheFile
from gitreg.api.blobs import REMOTE_PIECE, _chunks
from gitreg.errors import ResponseCut


class FailingSource(io.RawIOBase):
    def __init__(self) -> None:
        self.reads = 0
        self.closed_by_us = False

    def read(self, size: int = -1) -> bytes:
        self.reads += 1
        if self.reads > 1:
            raise OSError("connection reset by the store")
        return b"x" * size

    def close(self) -> None:
        self.closed_by_us = True
        super().close()


def test_a_store_failure_mid_body_is_one_logged_error_and_a_cut(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = FailingSource()
    got: list[bytes] = []

    async def drain() -> None:
        async for chunk in _chunks(cast(BinaryIO, source), "ab" * 32, 3 * REMOTE_PIECE):
            got.append(chunk)

    with caplog.at_level(logging.WARNING), pytest.raises(ResponseCut) as cut:
        anyio.run(drain)
    assert isinstance(cut.value.__cause__, OSError)
    assert [len(chunk) for chunk in got] == [REMOTE_PIECE]
    assert source.closed_by_us
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1
    assert "ab" * 32 in errors[0].getMessage()
    assert f"after {REMOTE_PIECE} of {3 * REMOTE_PIECE} bytes" in errors[0].getMessage()
    assert errors[0].exc_info is not None  # the store's traceback, once


def test_a_failed_local_read_is_one_logged_error_and_a_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A directory refuses RWF_NOWAIT as a file system without it would, which
    # turns the process-wide switch off: kept to this test.
    monkeypatch.setattr(blob_file, "_nowait", list(blob_file._nowait))
    # A directory's descriptor: every read of it fails (EISDIR), as a disk error would.
    file = PageCacheFile(os.open(tmp_path, os.O_RDONLY), "sha256/ab/abab")

    async def read() -> None:
        try:
            await file.read(4096)
        finally:
            await file.aclose()

    with caplog.at_level(logging.WARNING), pytest.raises(ResponseCut) as cut:
        anyio.run(read)
    assert isinstance(cut.value.__cause__, OSError)
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1
    assert "cut off sha256/ab/abab at byte 0" in errors[0].getMessage()
    assert errors[0].exc_info is not None

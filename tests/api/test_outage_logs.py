"""S3 stopped while the server runs: each request it fails and each staging
sweep it stops is one warning line, never an error or a traceback."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.settings import load_settings
from tests.support.s3 import MotoS3, moto_s3, new_bucket

BASE = "https://registry.example.com"


@pytest.fixture
def s3_outage() -> Iterator[MotoS3]:
    """A moto server of this test's own, which the test stops."""
    moto = moto_s3()
    yield moto
    moto.stop()


def lines(caplog: pytest.LogCaptureFixture, logger: str, part: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger and part in r.getMessage()]


def test_an_s3_outage_is_one_warning_line_per_failed_operation(
    s3_outage: MotoS3,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bucket = new_bucket(s3_outage, monkeypatch)
    settings = load_settings(
        # staging_ttl 1 s: a staging sweep every half second.
        {"data_dir": tmp_path / "data", "blob_store": bucket.url, "staging_ttl": 1},
        environ={"GITREG_S3_ADDRESSING": "path", "GITREG_JOB_WORKERS": "0"},
    )
    s3_outage.stop()
    caplog.set_level(logging.INFO)
    with TestClient(create_app(settings), base_url=BASE) as client:
        assert client.get(f"/archives/{'a' * 64}.tar.gz").status_code == 503
        deadline = time.monotonic() + 30
        while len(lines(caplog, "gitreg.app", "staging cleanup")) < 2:
            assert time.monotonic() < deadline, "no staging sweep met the outage"
            time.sleep(0.1)
    answered = lines(caplog, "gitreg.app", "/archives/")
    assert [(r.levelname, r.exc_info) for r in answered] == [("WARNING", None)]
    assert "blob store unavailable" in answered[0].getMessage()
    sweeps = lines(caplog, "gitreg.app", "staging cleanup")
    assert {(r.levelname, r.exc_info) for r in sweeps} == {("WARNING", None)}
    worse = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert worse == []
    # One line per failing operation: the client's reason is in it, and the S3
    # layer adds no warning of its own.
    assert answered[0].getMessage().count(":") >= 2
    assert [
        r for r in caplog.records if r.name == "gitreg.storage.s3" and r.levelno >= logging.INFO
    ] == []

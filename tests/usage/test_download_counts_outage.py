"""Download counts while PostgreSQL is stopped: each failed flush and each
failed read of the totals is one warning line, no traceback, and the counts
are kept for the next flush."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from pathlib import Path

import pytest

from gitreg.services import build_services
from gitreg.settings import load_settings
from tests.support.postgres import Database, PostgresServer

KEY = ("module", "acme", "a", "null", "1.0.0", 0)


def test_a_database_outage_is_one_warning_line_per_failed_flush(
    postgres_server: PostgresServer,
    postgres_database: Database,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = tmp_path / "secret.key"
    key.write_text(os.urandom(32).hex())
    key.chmod(0o600)
    settings = {"database_url": postgres_database.url, "secret_key_file": key}
    svc = build_services(load_settings({"data_dir": tmp_path / "data", **settings}, environ={}))
    counter = svc.downloads

    async def outage() -> None:
        counter.add(KEY)
        running = asyncio.create_task(counter.run(0.05))
        deadline = time.monotonic() + 60
        while not [r for r in caplog.records if "cannot write" in r.getMessage()]:
            assert time.monotonic() < deadline, "no flush met the outage"
            await asyncio.sleep(0.1)
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running

    try:
        caplog.set_level(logging.INFO)
        with postgres_server.down():
            asyncio.run(outage())
        assert counter.take() == {KEY: 1}  # kept for the next flush
    finally:
        svc.close()
    lines = [r for r in caplog.records if r.name == "gitreg.modules.downloads"]
    assert {(r.levelname, r.exc_info) for r in lines} == {("WARNING", None)}
    said = [r.getMessage() for r in lines]
    assert any(
        m.startswith("cannot read download totals: the database is unavailable") for m in said
    )
    assert any(m.startswith("cannot write 1 download counts, retrying: the database") for m in said)

"""Checks on a data directory left behind by a real gitreg process."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path


def assert_consistent(data_dir: Path) -> int:
    """Every recorded version has its complete archive; returns how many there are."""
    db = sqlite3.connect(data_dir / "index.sqlite3")
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = db.execute("SELECT archive_sha256, archive_size FROM module_versions").fetchall()
    finally:
        db.close()
    for sha256, size in rows:
        blob = data_dir / "blobs" / "sha256" / sha256[:2] / sha256
        data = blob.read_bytes()
        assert len(data) == size
        assert hashlib.sha256(data).hexdigest() == sha256
    return len(rows)

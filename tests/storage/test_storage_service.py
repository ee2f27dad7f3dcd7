"""Storage (gitreg/storage/service.py): what a backup and a move refuse before
they copy anything. The copies themselves are tests/storage/test_durability.py
and tests/e2e/test_e2e_scale_out_moves.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitreg.errors import BadRequest
from gitreg.services import build_services
from gitreg.settings import Settings, load_settings
from gitreg.storage.service import MoveTargets, move_targets

DATABASE = "postgresql://gitreg@db.example/gitreg"


def _settings(tmp_path: Path, **values: object) -> Settings:
    return load_settings({"data_dir": tmp_path / "data", **values}, environ={})


def test_a_backup_into_the_data_dir_itself_is_refused(tmp_path: Path) -> None:
    svc = build_services(_settings(tmp_path))
    try:
        with pytest.raises(BadRequest, match="must differ from the data dir"):
            svc.storage.backup(tmp_path / "data")
        done = svc.storage.backup(tmp_path / "copy")
        assert (done.dest, done.new_blobs) == (tmp_path / "copy", 0)
        assert (tmp_path / "copy" / "index.sqlite3").is_file()
    finally:
        svc.close()


@pytest.mark.parametrize(
    ("values", "database", "blobs", "refusal"),
    [
        ({}, "", "", "name a target"),
        ({"database_url": DATABASE, "secret_key_file": "k"}, DATABASE, "", "already uses"),
        ({}, DATABASE, "", "needs secret_key_file"),
    ],
)
def test_a_move_without_a_usable_target_is_refused(
    tmp_path: Path, values: dict[str, object], database: str, blobs: str, refusal: str
) -> None:
    with pytest.raises(BadRequest, match=refusal):
        move_targets(_settings(tmp_path, **values), database, blobs)


def test_a_move_carries_the_key_that_seals_the_secrets_there(tmp_path: Path) -> None:
    key = tmp_path / "secret.key"
    settings = _settings(tmp_path, secret_key_file=key)
    assert move_targets(settings, DATABASE, "s3://bucket/p") == MoveTargets(
        DATABASE, "s3://bucket/p", key
    )
    assert move_targets(_settings(tmp_path), "", "s3://b") == MoveTargets("", "s3://b", None)

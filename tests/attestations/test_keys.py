"""The attestation keys: made once, private to the service user, shared by
replicas through the sealed database store, rotated with the old public keys
kept; and a publish whose log step fails leaves neither version nor entry."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitreg.attestations.keys import KEYS_NAME, KeyRing
from gitreg.attestations.store_sql import AttestationStore
from gitreg.storage.attached import attach
from gitreg.storage.database import Connection
from gitreg.storage.index import Index, SQLiteIndex, open_index
from gitreg.storage.sealing import generate_key_file
from gitreg.storage.secrets import FileSecretStore, open_secret_store
from tests.support.backends import new_version


def test_first_key_is_private_and_rotation_keeps_old_public_keys(tmp_path: Path) -> None:
    ring = KeyRing(FileSecretStore(tmp_path))
    ring.ensure()
    path = tmp_path / KEYS_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first = ring.current()
    assert first.public.verify(first.sign(b"m"), b"m")
    fresh = ring.rotate()
    listed = ring.public_keys()
    assert [k.keyid for k in listed] == [fresh.keyid, first.public.keyid]
    assert listed[1].retired is not None and listed[0].retired is None
    assert first.seed.hex() not in path.read_text()  # a retired key can sign nothing again
    assert listed[1].verify(first.sign(b"old"), b"old")


@pytest.fixture(params=["sqlite", "postgresql"])
def two_replicas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[KeyRing]]:
    key_file = tmp_path / "secret.key"
    generate_key_file(key_file)
    opened: list[Index] = []
    rings = []
    for n in range(2):
        if request.param == "sqlite":
            index: Index = SQLiteIndex(tmp_path / "index.sqlite3")
        else:
            url = request.getfixturevalue("postgres_database").url
            index = open_index(url, tmp_path / "unused.sqlite3")
        opened.append(index)
        rings.append(KeyRing(open_secret_store(tmp_path / f"data{n}", key_file, index)))
    yield rings
    for index in opened:
        index.close()


def test_replicas_sign_with_one_key(two_replicas: list[KeyRing]) -> None:
    a, b = two_replicas
    a.ensure()
    b.ensure()
    assert a.current().public.keyid == b.current().public.keyid
    rotated = b.rotate()
    assert a.current().public.keyid == rotated.keyid


def test_a_failing_log_step_rolls_the_publish_back(tmp_path: Path) -> None:
    index = SQLiteIndex(tmp_path / "index.sqlite3")
    try:
        repo = index.add_repo("https://example.com/r.git", "r")
        index.add_module(repo.id, "acme", "net", "aws", "", "")
        module = index.find_module("acme", "net", "aws")
        assert module is not None
        store = AttestationStore(index)
        new = new_version(module.id)

        def failing(conn: Connection) -> None:
            store.append(conn, b'{"event":"publish"}')
            raise RuntimeError("the signature step failed")

        with pytest.raises(RuntimeError), attach(failing):
            index.publish_version(new)
        assert index.versions(module.id) == []
        assert store.size() == 0
        with attach(lambda conn: store.append(conn, b"{}")) as logged:
            assert index.publish_version(new)
        assert logged.ran
        assert store.size() == 1
    finally:
        index.close()

"""The SecretStore contract (files, and sealed in the database), and what only
the database store does: sealing at rest, the key check, importing file
secrets and sealing webhook secrets written in plaintext."""

from __future__ import annotations

import base64
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitreg.errors import BadRequest, ConfigError
from gitreg.storage.index import SQLiteIndex, open_index
from gitreg.storage.protocols import SecretStore
from gitreg.storage.sealing import generate_key_file, read_key_file
from gitreg.storage.secrets import file_secret_store, open_secret_store

URL_KEYS = "secrets/url-signing.keys"
PROVIDER_KEY = "keys/acme/0123ABCD.key"
PLAINTEXT = b"-----BEGIN PGP PRIVATE KEY BLOCK----- very secret material"


def key_file(path: Path) -> Path:
    generate_key_file(path)
    return path


def raw_database(db: Path) -> str:
    """Every row of every table, as SQL text: what a stolen database file shows."""
    conn = sqlite3.connect(db)
    try:
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


@pytest.fixture(params=["files", "database", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SecretStore]:
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_database").url
        index = open_index(url, tmp_path / "unused.sqlite3")
    else:
        index = SQLiteIndex(tmp_path / "data" / "index.sqlite3")
    key = key_file(tmp_path / "secret.key") if request.param != "files" else None
    try:
        yield open_secret_store(tmp_path / "data", key, index)
    finally:
        index.close()


def test_put_get_add_delete(store: SecretStore) -> None:
    assert store.get(PROVIDER_KEY) is None
    assert store.version(PROVIDER_KEY) == 0
    assert store.add(PROVIDER_KEY, b"first")
    assert not store.add(PROVIDER_KEY, b"second")  # add never replaces
    assert store.get(PROVIDER_KEY) == b"first"
    store.put(PROVIDER_KEY, b"third")
    assert store.get(PROVIDER_KEY) == b"third"
    assert store.names() == [PROVIDER_KEY]
    assert store.names("secrets/") == []
    assert store.delete(PROVIDER_KEY)
    assert not store.delete(PROVIDER_KEY)
    assert store.get(PROVIDER_KEY) is None and store.names() == []


def test_version_changes_whenever_the_value_does(store: SecretStore) -> None:
    seen = {store.version(URL_KEYS)}
    for value in (b"a", b"b", b"c"):
        store.put(URL_KEYS, value)
        seen.add(store.version(URL_KEYS))
    store.delete(URL_KEYS)
    seen.add(store.version(URL_KEYS))
    store.put(URL_KEYS, b"d")
    seen.add(store.version(URL_KEYS))
    assert len(seen) == 5  # 0 (absent), then one per value
    before = store.version(URL_KEYS)
    store.put(PROVIDER_KEY, b"other")  # another secret's write leaves this one's alone
    assert store.version(URL_KEYS) == before


@pytest.mark.parametrize("name", ["../x", "keys/../../etc/passwd", "keys/.hidden", "other/x", "x"])
def test_names_that_could_leave_their_directory_are_refused(store: SecretStore, name: str) -> None:
    with pytest.raises(BadRequest):
        store.put(name, b"x")


def test_webhook_secrets_round_trip(store: SecretStore) -> None:
    sealed = store.seal_webhook_secret("hook-secret")
    assert store.open_webhook_secret(sealed) == "hook-secret"
    assert store.open_webhook_secret("plain, from before a key") == "plain, from before a key"
    assert store.seal_webhook_secret("") == ""


def test_file_secrets_are_0600_files_at_their_name(tmp_path: Path) -> None:
    files = file_secret_store(tmp_path)
    files.put(PROVIDER_KEY, b"x")
    path = tmp_path / "keys" / "acme" / "0123ABCD.key"
    assert files.where(PROVIDER_KEY) == str(path)
    assert path.read_bytes() == b"x"
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700


def test_database_secrets_are_sealed_at_rest(tmp_path: Path) -> None:
    db = tmp_path / "data" / "index.sqlite3"
    index = SQLiteIndex(db)
    try:
        store = open_secret_store(tmp_path / "data", key_file(tmp_path / "k"), index)
        store.put(PROVIDER_KEY, PLAINTEXT)
        repo = index.add_repo(
            "https://git.example/a.git", "acme/a", store.seal_webhook_secret("hook-s3cret")
        )
        assert store.get(PROVIDER_KEY) == PLAINTEXT
    finally:
        index.close()
    dump = raw_database(db)
    assert "very secret material" not in dump
    assert base64.b64encode(PLAINTEXT).decode()[:20] not in dump
    assert "hook-s3cret" not in dump
    assert repo.webhook_secret.startswith("enc:v1:")
    assert not (tmp_path / "data" / "keys").exists()  # nothing written beside the database


def test_a_sealed_value_does_not_open_under_another_name(tmp_path: Path) -> None:
    db = tmp_path / "index.sqlite3"
    index = SQLiteIndex(db)
    try:
        store = open_secret_store(tmp_path, key_file(tmp_path / "k"), index)
        store.put(PROVIDER_KEY, PLAINTEXT)
        store.put(URL_KEYS, b"keys")
        conn = sqlite3.connect(db)
        with conn:  # an attacker with write access swaps the sealed values
            sealed = conn.execute("SELECT sealed FROM secrets WHERE name = ?", (PROVIDER_KEY,))
            conn.execute(
                "UPDATE secrets SET sealed = ? WHERE name = ?", (sealed.fetchone()[0], URL_KEYS)
            )
        conn.close()
        with pytest.raises(ConfigError, match="secret key does not match the database"):
            store.get(URL_KEYS)
    finally:
        index.close()


def test_another_key_is_refused_at_start(tmp_path: Path) -> None:
    index = SQLiteIndex(tmp_path / "index.sqlite3")
    try:
        first = open_secret_store(tmp_path, key_file(tmp_path / "one"), index)
        first.put(URL_KEYS, b"keys")
        with pytest.raises(ConfigError, match="secret key does not match the database"):
            open_secret_store(tmp_path, key_file(tmp_path / "two"), index)
        with pytest.raises(ConfigError, match="same secret_key_file"):
            open_secret_store(tmp_path, None, index)  # no key: would sign with keys of its own
    finally:
        index.close()


def test_file_secrets_are_imported_once_and_webhook_secrets_sealed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    index = SQLiteIndex(data / "index.sqlite3")
    try:
        files = open_secret_store(data, None, index)
        files.put(URL_KEYS, b"old url keys\n")
        files.put(PROVIDER_KEY, PLAINTEXT)
        index.add_repo("https://git.example/a.git", "acme/a", "plain-hook")
        key = key_file(tmp_path / "k")
        sealed = open_secret_store(data, key, index)
        assert sealed.names() == [PROVIDER_KEY, URL_KEYS]
        assert sealed.get(PROVIDER_KEY) == PLAINTEXT
        stored = index.repo_by_url("https://git.example/a.git").webhook_secret
        assert stored.startswith("enc:v1:") and sealed.open_webhook_secret(stored) == "plain-hook"
        # Rotated in the database since: a later start never brings the file back.
        sealed.put(URL_KEYS, b"new url keys\n")
        versions = {name: sealed.version(name) for name in sealed.names()}
        again = open_secret_store(data, key, index)
        assert again.get(URL_KEYS) == b"new url keys\n"
        assert {name: again.version(name) for name in again.names()} == versions
        assert index.repo_by_url("https://git.example/a.git").webhook_secret == stored
    finally:
        index.close()


def test_key_file_formats_and_checks(tmp_path: Path) -> None:
    raw = os.urandom(32)
    for text in (raw.hex(), raw.hex().upper() + "\n", base64.b64encode(raw).decode()):
        path = tmp_path / "key"
        path.write_text(text)
        path.chmod(0o600)
        assert read_key_file(path) == raw
    path.chmod(0o640)
    with pytest.raises(ConfigError, match="chmod 600"):
        read_key_file(path)
    path.chmod(0o600)
    for wrong in (raw.hex()[:-2], base64.b64encode(raw[:16]).decode(), "not a key", ""):
        path.write_text(wrong)
        with pytest.raises(ConfigError, match="32-byte key"):
            read_key_file(path)
    with pytest.raises(ConfigError, match="cannot read"):
        read_key_file(tmp_path / "missing")
    made = key_file(tmp_path / "made")
    assert made.stat().st_mode & 0o777 == 0o600 and len(read_key_file(made)) == 32
    with pytest.raises(ConfigError, match="never overwrites"):
        generate_key_file(made)

"""The two `SecretStore`s (protocols.py): files in the data directory, or rows
in the database sealed with the operator's key.

Without `secret_key_file` each secret is a 0600
file under the data directory, at its name (`secrets/url-signing.keys`,
`keys/<namespace>/<fingerprint>.key`). With it, secrets live in the `secrets`
table, so every replica sharing the database shares them; values are sealed
with AES-256-GCM (sealing.py) and stored as base64 TEXT, and every statement
here is plain SQL that PostgreSQL runs too. On each start with a key, file
secrets the database does not have yet are imported (idempotent), and
plaintext webhook secrets are sealed in place.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from gitreg.errors import BadRequest, ConfigError
from gitreg.storage.blobs import fsync_dir
from gitreg.storage.index import Index, IndexBackedStore, utcnow
from gitreg.storage.protocols import SecretStore
from gitreg.storage.sealing import FIELD_PREFIX, Sealer, read_key_file

# The directories under the data dir that hold file secrets, so their names'
# first parts; nothing else there is ever read or listed as a secret.
FILE_SECRET_DIRS = ("secrets", "keys")
_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\Z")
WEBHOOK_FIELD = "repos.webhook_secret"  # associated data of sealed webhook secrets


def check_name(name: str) -> list[str]:
    """A secret name's parts; refuses anything that could leave its directory."""
    parts = name.split("/")
    if len(parts) < 2 or parts[0] not in FILE_SECRET_DIRS or not all(map(_PART.match, parts)):
        raise BadRequest(f"invalid secret name {name!r}")
    return parts


class FileSecretStore:
    """One 0600 file per secret in 0700 directories, written atomically, so
    only the service user can read a secret, even for an instant."""

    def __init__(self, root: Path) -> None:
        self._root = root

    def _path(self, name: str) -> Path:
        return self._root.joinpath(*check_name(name))

    def get(self, name: str) -> bytes | None:
        try:
            return self._path(name).read_bytes()
        except FileNotFoundError:
            return None

    def put(self, name: str, value: bytes) -> None:
        self._write(name, value, replace=True)

    def add(self, name: str, value: bytes) -> bool:
        return self._write(name, value, replace=False)

    def delete(self, name: str) -> bool:
        try:
            self._path(name).unlink()
        except FileNotFoundError:
            return False
        return True

    def names(self, prefix: str = "") -> list[str]:
        found = []
        for top in FILE_SECRET_DIRS:
            for path in (self._root / top).rglob("*"):
                name = path.relative_to(self._root).as_posix()
                hidden = any(part.startswith(".") for part in path.relative_to(self._root).parts)
                if path.is_file() and not hidden and not name.endswith(".tmp"):
                    found.append(name)
        return sorted(n for n in found if n.startswith(prefix))

    def version(self, name: str) -> int:
        """A hash of the content: a stat's mtime and inode can repeat within
        one clock tick when a file is written twice, the content cannot."""
        value = self.get(name)
        if value is None:
            return 0
        return int.from_bytes(hashlib.blake2b(value, digest_size=8).digest(), "big") or 1

    def where(self, name: str) -> str:
        return str(self._path(name))

    def seal_webhook_secret(self, plaintext: str) -> str:
        return plaintext

    def open_webhook_secret(self, stored: str) -> str:
        if stored.startswith(FIELD_PREFIX):
            raise ConfigError(
                "this webhook secret is sealed with a secret key; start gitreg with the"
                " same secret_key_file (GITREG_SECRET_KEY_FILE) as the other replicas"
            )
        return stored

    def _write(self, name: str, value: bytes, replace: bool) -> bool:
        path = self._path(name)
        folder = self._root
        for part in path.relative_to(self._root).parts[:-1]:
            folder = folder / part
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(folder, 0o700)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".secret-")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(value)
                out.flush()
                os.fsync(out.fileno())
            if replace:
                os.replace(tmp_name, path)
            else:
                try:
                    os.link(tmp_name, path)  # fails if it exists: no race with another add
                except FileExistsError:
                    return False
            fsync_dir(path.parent)
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)


_INSERT = (
    "INSERT INTO secrets (name, key_id, sealed, version, updated_at) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (name) DO "
)
_REPLACE = _INSERT + (
    "UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed,"
    " version = excluded.version, updated_at = excluded.updated_at"
)
_ADD = _INSERT + "NOTHING"


def _what(name: str) -> str:
    """The associated data a secret is sealed with: its name."""
    return f"secret:{name}"


def _next_version(conn: Any) -> int:
    """Inside a write: bump the one-row `secret_versions` and return it. On PostgreSQL
    the UPDATE's row lock also orders concurrent writers."""
    conn.execute("UPDATE secret_versions SET last_version = last_version + 1 WHERE id = 1")
    row = conn.execute("SELECT last_version FROM secret_versions WHERE id = 1").fetchone()
    return int(row["last_version"])


class DatabaseSecretStore(IndexBackedStore):
    """Secrets in the `secrets` table, sealed with the operator's key."""

    def __init__(self, index: Index, sealer: Sealer) -> None:
        super().__init__(index)
        self._sealer = sealer

    def get(self, name: str) -> bytes | None:
        rows = self._rows("SELECT key_id, sealed FROM secrets WHERE name = ?", (name,))
        if not rows:
            return None
        return self._sealer.open(_what(name), rows[0]["sealed"], rows[0]["key_id"])

    def put(self, name: str, value: bytes) -> None:
        self._store(_REPLACE, name, value)

    def add(self, name: str, value: bytes) -> bool:
        return self._store(_ADD, name, value)

    def delete(self, name: str) -> bool:
        with self._write() as conn:
            _next_version(conn)
            return int(conn.execute("DELETE FROM secrets WHERE name = ?", (name,)).rowcount) == 1

    def names(self, prefix: str = "") -> list[str]:
        rows = self._rows("SELECT name FROM secrets ORDER BY name")
        return [row["name"] for row in rows if row["name"].startswith(prefix)]

    def version(self, name: str) -> int:
        rows = self._rows("SELECT version FROM secrets WHERE name = ?", (name,))
        return int(rows[0]["version"]) if rows else 0

    def where(self, name: str) -> str:
        return f"the database (sealed with secret key {self._sealer.key_id})"

    def seal_webhook_secret(self, plaintext: str) -> str:
        return self._sealer.seal_field(WEBHOOK_FIELD, plaintext) if plaintext else ""

    def open_webhook_secret(self, stored: str) -> str:
        return self._sealer.open_field(WEBHOOK_FIELD, stored)

    def _store(self, sql: str, name: str, value: bytes) -> bool:
        check_name(name)
        sealed = self._sealer.seal(_what(name), value)
        with self._write() as conn:
            version = _next_version(conn)
            cursor = conn.execute(sql, (name, self._sealer.key_id, sealed, version, utcnow()))
            return int(cursor.rowcount) == 1

    # -- start-up -----------------------------------------------------------

    @staticmethod
    def holds_sealed(index: Index) -> bool:
        """Whether anything in the database is sealed (asked when no key is set)."""
        reader = IndexBackedStore(index)
        if reader._rows("SELECT name FROM secrets LIMIT 1"):
            return True
        sealed = "SELECT id FROM repos WHERE webhook_secret LIKE ? LIMIT 1"
        return bool(reader._rows(sealed, (FIELD_PREFIX + "%",)))

    def check_key(self) -> None:
        """ConfigError at start-up, not at the first download, when anything in
        the database was sealed with another key."""
        for row in self._rows("SELECT name, key_id FROM secrets"):
            if row["key_id"] != self._sealer.key_id:
                raise self._sealer.mismatch(f"secret {row['name']}", row["key_id"])
        for stored in self._sealed_webhook_secrets():
            self.open_webhook_secret(stored)

    def import_files(self, files: SecretStore) -> int:
        """Copy in the file secrets the database lacks (idempotent; a secret
        already in the database, rotated since, is never overwritten)."""
        have = set(self.names())
        imported = 0
        for name in files.names():
            value = files.get(name)
            if name not in have and value is not None:
                imported += self.add(name, value)
        return imported

    def seal_webhook_secrets(self) -> int:
        """Seal webhook secrets written in plaintext before the key was set."""
        rows = self._rows(
            "SELECT id, webhook_secret FROM repos"
            " WHERE webhook_secret <> '' AND webhook_secret NOT LIKE ?",
            (FIELD_PREFIX + "%",),
        )
        for row in rows:
            with self._write() as conn:  # unless it changed since it was read
                conn.execute(
                    "UPDATE repos SET webhook_secret = ? WHERE id = ? AND webhook_secret = ?",
                    (
                        self.seal_webhook_secret(row["webhook_secret"]),
                        row["id"],
                        row["webhook_secret"],
                    ),
                )
        return len(rows)

    def _sealed_webhook_secrets(self) -> list[str]:
        rows = self._rows(
            "SELECT webhook_secret FROM repos WHERE webhook_secret LIKE ?", (FIELD_PREFIX + "%",)
        )
        return [row["webhook_secret"] for row in rows]


def file_secret_store(data_dir: Path) -> SecretStore:
    """Secrets as files under `data_dir`: the store without a secret key."""
    return FileSecretStore(data_dir)


def open_secret_store(data_dir: Path, key_file: Path | None, index: Index) -> SecretStore:
    """The store the settings ask for. With a key: the database store, checked
    against the key, with file secrets imported and webhook secrets sealed.
    Without one, a database that already holds sealed secrets is refused:
    this process would otherwise sign with keys no other replica knows."""
    files = FileSecretStore(data_dir)
    if key_file is None:
        if DatabaseSecretStore.holds_sealed(index):
            raise ConfigError(
                "the database holds secrets sealed with a secret key; start gitreg with the"
                " same secret_key_file (GITREG_SECRET_KEY_FILE) as the other replicas"
            )
        return files
    store = DatabaseSecretStore(index, Sealer(read_key_file(key_file), str(key_file)))
    store.check_key()
    store.import_files(files)
    store.seal_webhook_secrets()
    return store

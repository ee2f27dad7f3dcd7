"""The operator's secret key (`secret_key_file`) and AES-256-GCM sealing with it.

Secrets shared through the database are sealed before they are
written: AES-256-GCM with a random 96-bit nonce, and the secret's name as
associated data, so a sealed value copied onto another name does not open.
Each sealed value carries the key's id (a hash of the key, never the key), so
a replica started with another key is told so instead of failing to decrypt,
and a later change of the operator's key can tell old values from new ones.

The key file holds 32 random bytes as 64 hex characters or as base64, and
must be readable by its owner only; `gitreg secret generate-key FILE` writes
one. `cryptography` is imported only when a key is configured: a server
without one never loads it (RSS budget, docs/performance.md).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from gitreg.errors import ConfigError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32
NONCE_BYTES = 12  # 96 bits, GCM's native nonce size
# Values kept in another table's column (repos.webhook_secret) are marked, so
# plaintext written before a key was configured still reads.
FIELD_PREFIX = "enc:v1:"


def generate_key_file(path: Path) -> None:
    """A new key file: 64 hex characters, mode 0600, never over an existing file
    (overwriting the key would make every sealed secret unreadable)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as exc:
        raise ConfigError(f"{path} already exists; gitreg never overwrites a secret key") from exc
    except OSError as exc:
        raise ConfigError(f"cannot create {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "w") as out:
        out.write(os.urandom(KEY_BYTES).hex() + "\n")
        out.flush()
        os.fsync(out.fileno())


def _decode(text: str) -> bytes | None:
    if len(text) == 2 * KEY_BYTES:
        try:
            return bytes.fromhex(text)
        except ValueError:
            return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == KEY_BYTES else None


def read_key_file(path: Path) -> bytes:
    """The 32-byte key in `path`; ConfigError when it is missing, readable by
    others, or not 32 bytes as hex or base64."""
    try:
        info = path.stat()
        text = path.read_text(encoding="ascii").strip()
    except OSError as exc:
        raise ConfigError(f"cannot read secret_key_file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"secret_key_file {path} must hold hex or base64 text") from exc
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"secret_key_file {path} is not a regular file")
    if info.st_mode & 0o077:
        raise ConfigError(
            f"secret_key_file {path} is readable or writable by others"
            f" (mode {stat.S_IMODE(info.st_mode):04o}); run `chmod 600 {path}`"
        )
    key = _decode(text)
    if key is None:
        raise ConfigError(
            f"secret_key_file {path} must hold a {KEY_BYTES}-byte key as 64 hex characters"
            " or base64 (make one with `gitreg secret generate-key FILE`)"
        )
    return key


def key_id(key: bytes) -> str:
    """A public name for the key: safe to store, says nothing about the key."""
    return hashlib.sha256(b"gitreg secret key id\0" + key).hexdigest()[:16]


class Sealer:
    """Seals and opens values with one key; `what` is bound as associated data."""

    def __init__(self, key: bytes, source: str) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead: AESGCM = AESGCM(key)
        self.key_id = key_id(key)
        self.source = source  # where the key came from, for messages

    def seal(self, what: str, plaintext: bytes) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, plaintext, what.encode())
        return base64.b64encode(nonce + sealed).decode("ascii")

    def open(self, what: str, sealed: str, sealed_with: str) -> bytes:
        """The plaintext; ConfigError when another key sealed it or it was altered."""
        from cryptography.exceptions import InvalidTag

        if sealed_with != self.key_id:
            raise self.mismatch(what, sealed_with)
        try:
            raw = base64.b64decode(sealed, validate=True)
            return self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], what.encode())
        except (InvalidTag, binascii.Error, ValueError) as exc:
            raise self.mismatch(what, sealed_with) from exc

    def mismatch(self, what: str, sealed_with: str) -> ConfigError:
        return ConfigError(
            f"the secret key does not match the database: {what} was sealed with key id"
            f" {sealed_with}, but secret_key_file {self.source} has key id {self.key_id}"
            " (give every replica the same secret_key_file)"
        )

    def seal_field(self, what: str, plaintext: str) -> str:
        """`enc:v1:<key id>:<base64>` for a column that may also hold plaintext."""
        return f"{FIELD_PREFIX}{self.key_id}:{self.seal(what, plaintext.encode())}"

    def open_field(self, what: str, stored: str) -> str:
        if not stored.startswith(FIELD_PREFIX):
            return stored  # written before a key was configured
        sealed_with, _, sealed = stored[len(FIELD_PREFIX) :].partition(":")
        return self.open(what, sealed, sealed_with).decode()

"""The registry's attestation keys: Ed25519, made at first start, kept in the
SecretStore under `secrets/attestation.keys` (a 0600 file, or sealed in the
shared database when a secret key is configured, so every replica signs with
the same key, as with the URL-signing keys).

The file is JSON: a list of keys, the current one first, each with its 32-byte
private seed (hex) and its raw public key (hex). A key is made as a random
seed alone, so a serving worker's start needs no cryptography import
(tests/server/test_serve_imports.py); its public half is derived where it is
used. Rotation puts a new key first and marks the others retired, keeping only
their public half, so old statements and checkpoints still verify and nothing
can be signed with them again. A key id is the hex SHA-256 of the public key's
DER SubjectPublicKeyInfo, as the envelopes' `keyid` carries it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from gitreg.errors import ConfigError
from gitreg.storage.protocols import SecretStore

KEYS_NAME = "secrets/attestation.keys"
ALGORITHM = "ed25519"
# RFC 8410: the DER SubjectPublicKeyInfo of an Ed25519 key is this prefix and the raw key.
_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")


def keyid_of(raw: bytes) -> str:
    return hashlib.sha256(_SPKI_PREFIX + raw).hexdigest()


def pem_of(raw: bytes) -> str:
    body = base64.b64encode(_SPKI_PREFIX + raw).decode()
    return f"-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n"


def verify_ed25519(raw: bytes, signature: bytes, message: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def _public_of(seed: bytes) -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return (
        Ed25519PrivateKey.from_private_bytes(seed)
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )


@dataclass(frozen=True)
class PublicKey:
    raw: bytes
    created: float
    retired: float | None  # when a newer key replaced it

    @property
    def keyid(self) -> str:
        return keyid_of(self.raw)

    def verify(self, signature: bytes, message: bytes) -> bool:
        return verify_ed25519(self.raw, signature, message)

    def listing(self) -> dict[str, object]:
        return {
            "keyid": self.keyid,
            "algorithm": ALGORITHM,
            "pem": pem_of(self.raw),
            "created": _stamp(self.created),
            "status": "retired" if self.retired is not None else "current",
            **({"retired": _stamp(self.retired)} if self.retired is not None else {}),
        }


class SigningKey:
    def __init__(self, public: PublicKey, seed: bytes) -> None:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        self.public = public
        self.seed = seed
        self._private = Ed25519PrivateKey.from_private_bytes(seed)

    def sign(self, message: bytes) -> bytes:
        return self._private.sign(message)


def _stamp(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def _new_entry(now: float) -> dict[str, Any]:
    return {"seed": secrets.token_hex(32), "public": "", "created": now, "retired": None}


class KeyRing:
    """The attestation keys of one registry, read from the SecretStore at each
    use: a rotation by any replica is seen by the next signature."""

    def __init__(self, secrets_store: SecretStore) -> None:
        self._secrets = secrets_store
        # The keys as last read, by the stored bytes they were read from: a
        # publish signs without deriving the key again unless it was rotated.
        self._loaded: tuple[bytes, list[PublicKey], SigningKey | None] | None = None

    def _stored(self) -> bytes:
        stored = self._secrets.get(KEYS_NAME)
        if stored is None:
            # `add`, not `put`: replicas starting together agree on one first key.
            self._secrets.add(KEYS_NAME, json.dumps([_new_entry(time.time())]).encode())
            stored = self._secrets.get(KEYS_NAME)
            assert stored is not None
        return stored

    def _entries(self, stored: bytes | None = None) -> list[dict[str, Any]]:
        stored = self._stored() if stored is None else stored
        try:
            entries = json.loads(stored)
            if not isinstance(entries, list) or not entries:
                raise ValueError("empty")
            return [dict(e) for e in entries]
        except (ValueError, TypeError):
            raise ConfigError(f"{self._secrets.where(KEYS_NAME)} is not a key list") from None

    def ensure(self) -> None:
        """Make the first key if there is none (no cryptography needed)."""
        self._stored()

    def public_keys(self) -> list[PublicKey]:
        """Every key, the current one first."""
        return self._load()[1]

    def _load(self) -> tuple[bytes, list[PublicKey], SigningKey | None]:
        stored = self._stored()
        loaded = self._loaded
        if loaded is not None and loaded[0] == stored:
            return loaded
        entries = self._entries(stored)
        found = []
        for entry in entries:
            raw = bytes.fromhex(entry["public"]) if entry.get("public") else b""
            if not raw:
                raw = _public_of(bytes.fromhex(entry["seed"]))
            retired = entry.get("retired")
            found.append(PublicKey(raw, float(entry["created"]), retired))
        seed = entries[0].get("seed")
        signing = SigningKey(found[0], bytes.fromhex(seed)) if seed else None
        self._loaded = (stored, found, signing)
        return self._loaded

    def current(self) -> SigningKey:
        signing = self._load()[2]
        if signing is None:
            raise ConfigError("the current attestation key has no private half")
        return signing

    def rotate(self, now: float | None = None) -> PublicKey:
        """Make a new current key; the others are retired and keep their public half."""
        when = time.time() if now is None else now
        old = self._entries()
        for entry, public in zip(old, self.public_keys(), strict=True):
            entry["public"] = public.raw.hex()
            entry["seed"] = ""
            if entry.get("retired") is None:
                entry["retired"] = when
        self._secrets.put(KEYS_NAME, json.dumps([_new_entry(when), *old]).encode())
        return self.public_keys()[0]

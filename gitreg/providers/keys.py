"""Signing keys per namespace: register, generate, retire, and the private key files.

Two kinds of key (docs/providers.md, Keys):
- registered: a publisher's public key. Publisher signatures on SHA256SUMS are
  verified against it at ingest and served unchanged.
- generated: an RSA key gitreg holds, to sign SHA256SUMS of uploads and
  releases that come unsigned (`--sign`). The secret key lives under
  `<data-dir>/keys/`, a 0700 directory, in 0600 files written atomically, so
  only the service user can read it (checklist P3).

Retiring a key stops it verifying or signing new versions; versions it signed
keep serving it, since each version records its key (P3: rotation).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gitreg.errors import BadRequest, NotFound
from gitreg.providers.signing import PublicKeyInfo, generate_key, parse_public_key
from gitreg.settings import Settings
from gitreg.storage.protocols import ProviderIndex
from gitreg.storage.providers import KeyRecord

ALGORITHMS = {"rsa3072": 3072, "rsa4096": 4096}
_UNVERIFIABLE = ("ed25519", "cv25519", "eddsa", "ed448", "ecdsa", "ecc", "x25519")


@dataclass(frozen=True)
class Registered:
    key: KeyRecord
    created: bool
    warnings: tuple[str, ...]


class KeyManager:
    def __init__(self, settings: Settings, store: ProviderIndex) -> None:
        self._settings = settings
        self._store = store

    @property
    def keys_dir(self) -> Path:
        return self._settings.data_dir / "keys"

    def secret_path(self, key: KeyRecord) -> Path:
        return self.keys_dir / key.namespace / f"{key.fingerprint}.key"

    def add(self, namespace: str, data: bytes) -> Registered:
        """Register a publisher's public key; warn when Terraform 1.0.x cannot use it."""
        info = parse_public_key(data)
        warnings = list(info.problems)
        if info.problems:
            warnings.append(
                "Terraform 1.0.x cannot verify signatures by this key; releases signed"
                " with it are refused unless allow_unverifiable_keys is set."
                " Use an RSA key (gpg --quick-generate-key NAME rsa4096 sign)"
            )
        key, created = self._add(namespace, info, "registered")
        return Registered(key, created, tuple(warnings))

    def generate(self, namespace: str, algorithm: str = "rsa3072") -> KeyRecord:
        """A new RSA key for gitreg to sign with; the newest active one signs."""
        name = algorithm.strip().lower()
        if name in _UNVERIFIABLE or name.startswith(_UNVERIFIABLE):
            raise BadRequest(
                f"gitreg does not generate {algorithm} keys: Terraform 1.0.x cannot verify"
                ' them ("openpgp: unsupported feature: public key type"); use rsa3072 or rsa4096'
            )
        if name not in ALGORITHMS:
            raise BadRequest(f"unknown key algorithm {algorithm!r}; use rsa3072 or rsa4096")
        secret, info = generate_key(f"{namespace} provider signing key (gitreg)", ALGORITHMS[name])
        self._write_secret(namespace, info, secret.encode())
        key, _ = self._add(namespace, info, "generated")
        return key

    def retire(self, namespace: str, key_id: str) -> KeyRecord:
        return self._store.retire_key(namespace, key_id)

    def verification_keys(self, namespace: str) -> list[tuple[KeyRecord, PublicKeyInfo]]:
        """The namespace's active keys, parsed (subkey IDs are needed to match a signature)."""
        return [
            (key, parse_public_key(key.ascii_armor.encode()))
            for key in self._store.keys(namespace, active_only=True)
        ]

    def signing_key(self, namespace: str) -> tuple[KeyRecord, bytes]:
        """The newest active generated key and its secret, or NotFound."""
        generated = [
            k for k in self._store.keys(namespace, active_only=True) if k.origin == "generated"
        ]
        if not generated:
            raise NotFound(
                f"namespace {namespace!r} has no signing key of gitreg's own; create one"
                f" with `gitreg key generate {namespace}`"
            )
        key = generated[-1]
        try:
            return key, self.secret_path(key).read_bytes()
        except OSError as exc:
            raise NotFound(
                f"the secret of key {key.key_id} is missing from {self.keys_dir}: {exc.strerror}"
            ) from exc

    def _add(self, namespace: str, info: PublicKeyInfo, origin: str) -> tuple[KeyRecord, bool]:
        return self._store.add_key(
            namespace,
            info.key_id,
            info.fingerprint,
            info.armor,
            info.algorithms,
            info.terraform_compatible,
            origin,
        )

    def _write_secret(self, namespace: str, info: PublicKeyInfo, secret: bytes) -> None:
        """Atomic and never readable by others, even for an instant (P3)."""
        directory = self.keys_dir / namespace.lower()
        for folder in (self.keys_dir, directory):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(folder, 0o700)
        fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=".key-")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(secret)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp_name, directory / f"{info.fingerprint}.key")
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)

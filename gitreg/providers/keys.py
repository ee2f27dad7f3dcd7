"""Signing keys per namespace: register, generate, retire, and the private key files.

Two kinds of key (docs/providers.md, Keys):
- registered: a publisher's public key. Publisher signatures on SHA256SUMS are
  verified against it at ingest and served unchanged.
- generated: an RSA key gitreg holds, to sign SHA256SUMS of uploads and
  releases that come unsigned (`--sign`). The secret key is the secret
  `keys/<namespace>/<fingerprint>.key` of the SecretStore: a 0600 file in a
  0700 directory under the data dir, written atomically, so only the service
  user can read it; or, with a secret key configured, sealed in
  the database every replica shares (docs/scale-out.md).

Retiring a key stops it verifying or signing new versions; versions it signed
keep serving it, since each version records its key.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitreg.errors import BadRequest, NotFound
from gitreg.providers.signing import PublicKeyInfo, generate_key, parse_public_key
from gitreg.providers.store import KeyRecord, ProviderIndex
from gitreg.settings import Settings
from gitreg.storage.protocols import SecretStore

ALGORITHMS = {"rsa3072": 3072, "rsa4096": 4096}
_UNVERIFIABLE = ("ed25519", "cv25519", "eddsa", "ed448", "ecdsa", "ecc", "x25519")


@dataclass(frozen=True)
class Registered:
    key: KeyRecord
    created: bool
    warnings: tuple[str, ...]


class KeyManager:
    def __init__(self, settings: Settings, store: ProviderIndex, secrets: SecretStore) -> None:
        self._settings = settings
        self._store = store
        self.secrets = secrets

    def secret_name(self, key: KeyRecord) -> str:
        return _secret_name(key.namespace, key.fingerprint)

    def secret_location(self, key: KeyRecord) -> str:
        """Where the secret of a generated key is kept, for the operator's eyes."""
        return self.secrets.where(self.secret_name(key))

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
        self.secrets.put(_secret_name(namespace, info.fingerprint), secret.encode())
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
        name = self.secret_name(key)
        secret = self.secrets.get(name)
        if secret is None:
            raise NotFound(
                f"the secret of key {key.key_id} is missing from {self.secrets.where(name)}"
            )
        return key, secret

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


def _secret_name(namespace: str, fingerprint: str) -> str:
    """Namespaces match case-insensitively, so the name is lower-cased, as the
    key directories already on disk are."""
    return f"keys/{namespace.lower()}/{fingerprint}.key"

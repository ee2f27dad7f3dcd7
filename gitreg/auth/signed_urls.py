"""Time-limited, HMAC-signed download URLs for private content (docs/security.md).

Terraform fetches module archives, provider zips, SHA256SUMS and signatures
without credentials (TERRAFORM-CLIENT.md "What is sent where"), so the
authenticated metadata answer hands out a URL that carries its own proof:
`?expires=<unix time>&signature=<base64url HMAC-SHA256(key, path + "\\n" + expires)>`.
The signature binds the exact path (which names the artifact by sha256) and
the expiry, and is valid for HEAD and GET alike. The keys are the secret
`secrets/url-signing.keys` of the SecretStore (a 0600 file under the data dir,
or sealed in the shared database when a secret key is configured).
Rotation puts a new key first and keeps the previous one for verification, so
URLs already handed out keep working until they expire.

Across replicas: every server process re-reads the keys when the store's
version of them changes, looked at once a second by a task of the app's
lifespan on a worker thread (`gitreg.app`), never on the request path: with the
keys in PostgreSQL that look is a query, and during an outage it waits for the
pool's timeout, which must not stall the event loop. A new key signs only once
it is `ACTIVATE_AFTER` seconds old, so by then every replica already knows it
and a URL signed by one is accepted by all.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass

from gitreg.errors import DatabaseUnavailable, Forbidden
from gitreg.storage.protocols import SecretStore

log = logging.getLogger("gitreg.auth")

KEYS_NAME = "secrets/url-signing.keys"
KEEP_KEYS = 2
ACTIVATE_AFTER = 3.0  # seconds: more than the 1 s poll, plus clock skew between replicas
RECHECK_EVERY = 1.0


@dataclass(frozen=True)
class SigningKey:
    secret: bytes
    created: float  # Unix time; 0 for keys written before this was recorded


def _parse(text: str) -> list[SigningKey]:
    """One key per line: hex, then its creation time (absent in older files)."""
    keys = []
    for line in text.splitlines():
        fields = line.split()
        if fields:
            created = float(fields[1]) if len(fields) > 1 else 0.0
            keys.append(SigningKey(bytes.fromhex(fields[0]), created))
    return keys


def _format(keys: list[SigningKey]) -> bytes:
    return "".join(f"{k.secret.hex()} {k.created:.0f}\n" for k in keys).encode()


def _load_or_create(store: SecretStore) -> list[SigningKey]:
    stored = store.get(KEYS_NAME)
    if stored is None:
        # `add`, not `put`: replicas starting together agree on one first key.
        store.add(KEYS_NAME, _format([SigningKey(secrets.token_bytes(32), 0.0)]))
        stored = store.get(KEYS_NAME)
        assert stored is not None
    return _parse(stored.decode())


def rotate_signing_key(store: SecretStore, now: float | None = None) -> None:
    """Put a fresh key first; keep one previous key for URLs already handed out."""
    old = _parse((store.get(KEYS_NAME) or b"").decode())
    fresh = SigningKey(secrets.token_bytes(32), time.time() if now is None else now)
    store.put(KEYS_NAME, _format([fresh, *old][:KEEP_KEYS]))


def _mac(key: bytes, path: str, expires: int) -> str:
    digest = hmac.new(key, f"{path}\n{expires}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


class UrlSigner:
    def __init__(self, store: SecretStore, ttl: float) -> None:
        self._store = store
        # The version is read before the keys, so a rotation in between is
        # seen at the next look rather than missed.
        self._version = store.version(KEYS_NAME)
        self._keys = _load_or_create(store)
        self._checked_at = time.monotonic()
        self.ttl = ttl

    def rotate(self) -> None:
        """A fresh key first (`rotate_signing_key`); this and every other
        process picks it up at its next look (`reload_if_rotated`)."""
        rotate_signing_key(self._store)

    def reload_if_rotated(self, now: float | None = None, every: float = RECHECK_EVERY) -> None:
        """Pick up a rotation done by another process (`gitreg secret rotate`,
        another replica). Looks at the store's version at most once per `every`
        seconds. Blocking (a database query on the shared store): call it from
        a worker thread, never from a request's path."""
        now = time.monotonic() if now is None else now
        if now - self._checked_at < every:
            return
        self._checked_at = now
        try:
            version = self._store.version(KEYS_NAME)
        except DatabaseUnavailable as exc:
            # Keep signing and verifying with the keys already known: an outage
            # must not turn every private download into an error.
            log.warning("cannot check for rotated URL-signing keys: %s", exc)
            return
        if version != self._version:
            self._keys = _load_or_create(self._store)
            self._version = version

    def _signing_key(self, now: float) -> bytes:
        """The newest key every replica has had time to learn; the oldest kept
        one while all are younger (right after a rotation)."""
        settled = [k for k in self._keys if k.created <= now - ACTIVATE_AFTER]
        return (settled[0] if settled else self._keys[-1]).secret

    def sign(self, path: str, now: float | None = None) -> str:
        """The query string (without `?`) that makes `path` downloadable until expiry."""
        wall = now or time.time()
        expires = int(wall + self.ttl)
        return f"expires={expires}&signature={_mac(self._signing_key(wall), path, expires)}"

    def verify(self, path: str, query: Mapping[str, str], now: float | None = None) -> None:
        """Raise Forbidden unless the query carries a current signature for `path`."""
        raw_expires = query.get("expires", "")
        signature = query.get("signature", "")
        digits = raw_expires.isascii() and raw_expires.isdigit()  # isdigit() alone takes "²"
        if not digits or len(raw_expires) > 12 or not signature:
            raise Forbidden("this download needs a valid signed URL; ask the registry again")
        expires = int(raw_expires)
        if expires < (now or time.time()):
            raise Forbidden("this signed download URL has expired; ask the registry again")
        # Bytes: compare_digest refuses str with non-ASCII characters (a 500, not a 403).
        sent = signature.encode()
        # No reload on a miss: a key signs only after every replica has had
        # ACTIVATE_AFTER seconds to learn it, so a miss is a bad signature.
        if not self._matches(path, expires, sent):
            raise Forbidden("invalid signature on this download URL")

    def _matches(self, path: str, expires: int, sent: bytes) -> bool:
        return any(
            hmac.compare_digest(_mac(k.secret, path, expires).encode(), sent) for k in self._keys
        )

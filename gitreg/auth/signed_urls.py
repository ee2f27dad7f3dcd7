"""Time-limited, HMAC-signed download URLs for private content (checklist U2).

Terraform fetches module archives, provider zips, SHA256SUMS and signatures
without credentials (TERRAFORM-CLIENT.md "What is sent where"), so the
authenticated metadata answer hands out a URL that carries its own proof:
`?expires=<unix time>&signature=<base64url HMAC-SHA256(key, path + "\\n" + expires)>`.
The signature binds the exact path (which names the artifact by sha256) and
the expiry, and is valid for HEAD and GET alike. Keys live in
`<data-dir>/secrets/url-signing.keys` (0600); rotation puts a new key first and
keeps the previous one for verification, so URLs already handed out keep
working until they expire.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Mapping
from pathlib import Path

from gitreg.errors import Forbidden

KEYS_FILE = "url-signing.keys"
KEEP_KEYS = 2


def _load_or_create(secrets_dir: Path) -> list[bytes]:
    path = secrets_dir / KEYS_FILE
    if not path.exists():
        rotate_signing_key(secrets_dir)
    lines = path.read_text().split()
    return [bytes.fromhex(line) for line in lines if line]


def rotate_signing_key(secrets_dir: Path) -> None:
    """Put a fresh key first; keep one previous key for URLs already handed out."""
    secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = secrets_dir / KEYS_FILE
    old = path.read_text().split() if path.exists() else []
    keys = [secrets.token_hex(32), *old][:KEEP_KEYS]
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(keys) + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def _mac(key: bytes, path: str, expires: int) -> str:
    digest = hmac.new(key, f"{path}\n{expires}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


class UrlSigner:
    def __init__(self, secrets_dir: Path, ttl: float) -> None:
        self._secrets_dir = secrets_dir
        self._keys = _load_or_create(secrets_dir)
        self._mtime = self._keys_mtime()
        self._checked_at = time.monotonic()
        self.ttl = ttl

    def _keys_mtime(self) -> float:
        return (self._secrets_dir / KEYS_FILE).stat().st_mtime

    def reload_if_rotated(self, now: float | None = None) -> None:
        """Pick up a rotation done by another process (`gitreg secret rotate`).
        Looks at the file at most once a second: it runs on the event loop, on
        every signing and every private download."""
        now = time.monotonic() if now is None else now
        if now - self._checked_at < 1.0:
            return
        self._checked_at = now
        mtime = self._keys_mtime()
        if mtime != self._mtime:
            self._keys = _load_or_create(self._secrets_dir)
            self._mtime = mtime

    def sign(self, path: str, now: float | None = None) -> str:
        """The query string (without `?`) that makes `path` downloadable until expiry."""
        self.reload_if_rotated()
        expires = int((now or time.time()) + self.ttl)
        return f"expires={expires}&signature={_mac(self._keys[0], path, expires)}"

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
        if not any(hmac.compare_digest(_mac(k, path, expires).encode(), sent) for k in self._keys):
            raise Forbidden("invalid signature on this download URL")

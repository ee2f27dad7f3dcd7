"""Checking forge signatures and tokens, always in constant time.

Every check takes the raw request body as received: re-serialised JSON would
not reproduce the sender's bytes. An empty secret never verifies anything,
so a route or repository without a secret refuses every delivery.
"""

from __future__ import annotations

import hashlib
import hmac


def hmac_sha256_hex(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def hex_signature_ok(secret: str, body: bytes, sent: str | None, prefix: str = "") -> bool:
    """`sent` is `prefix` + the hex HMAC-SHA256 of `body` under `secret`.

    GitHub (`X-Hub-Signature-256`) and Bitbucket (`X-Hub-Signature`) send
    `sha256=<hex>`; Gitea and Forgejo send the bare hex digest.
    """
    if not secret or not sent:
        return False
    expected = prefix + hmac_sha256_hex(secret, body)
    # Hex digests compare case-insensitively; compare_digest needs equal types.
    return hmac.compare_digest(expected.encode(), sent.strip().lower().encode())


def token_ok(secret: str, sent: str | None) -> bool:
    """GitLab sends the secret itself in `X-Gitlab-Token`."""
    if not secret or not sent:
        return False
    return hmac.compare_digest(secret.encode(), sent.encode())

"""In-flight sign-in steps kept in the index, shared by `terraform login`
(gitreg.auth.login) and the web UI's sign-in (gitreg.auth.web_sign_in).

A step is a JSON object stored under `kind:sha256(secret)`: the database
never holds a usable state or code. Taking a step deletes it, so each is
used once even when two replicas race (`AuthIndex.take_login_state`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import anyio.to_thread

from gitreg.storage.protocols import AuthIndex


def hashed(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def step_key(kind: str, secret: str) -> str:
    return f"{kind}:{hashed(secret)}"


async def put_step(
    store: AuthIndex, key: str, payload: dict[str, Any], ttl: float, now: float
) -> None:
    text = json.dumps(payload)
    await anyio.to_thread.run_sync(store.put_login_state, key, text, now + ttl, now)


async def take_step(store: AuthIndex, key: str, now: float) -> dict[str, Any] | None:
    text = await anyio.to_thread.run_sync(store.take_login_state, key, now)
    return None if text is None else dict(json.loads(text))

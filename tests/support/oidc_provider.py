"""The real OpenID Provider of the sign-in tests: the npm package `oidc-provider`
(pinned in tests/oidc/package-lock.json) run by the machine's Node.js, with
tests/oidc/provider.mjs's people (alice in platform-team, bob in other, carol
in registry-admins) and a client `gitreg`. Like Terraform, it is never
skipped: missing, it fails loudly.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import secrets
import select
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gitreg.auth.oidc import OidcClient

OIDC_DIR = Path(__file__).parents[1] / "oidc"
CLIENT_ID = "gitreg"


@dataclass(frozen=True)
class RunningProvider:
    issuer: str
    client_id: str
    client_secret: str

    def gitreg_env(self) -> dict[str, str]:
        """The variables that point `gitreg serve` at this provider."""
        return {
            "GITREG_OIDC_ISSUER": self.issuer,
            "GITREG_OIDC_CLIENT_ID": self.client_id,
            "GITREG_OIDC_CLIENT_SECRET": self.client_secret,
            "GITREG_OIDC_SCOPES": "openid email profile groups",
        }


def _node_modules() -> None:
    installed = OIDC_DIR / "node_modules" / "oidc-provider"
    if installed.is_dir():
        return
    npm = shutil.which("npm")
    if npm is None:
        raise AssertionError("npm is missing: the sign-in tests need Node.js (see .ci/run)")
    # Test workers run side by side: one installs, the others wait for it.
    with (OIDC_DIR / ".npm-ci.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed.is_dir():
            subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=OIDC_DIR, check=True)


# Seconds a provider has to announce that it listens. Node has been seen,
# rarely, to stall for good before that (its main thread waiting on a futex);
# such a provider is replaced rather than waited for.
ANNOUNCE_WITHIN = 30.0
ATTEMPTS = 3


@contextmanager
def oidc_provider(redirect_uri: str) -> Iterator[RunningProvider]:
    """Start the provider with one registered redirect URI; stop it on exit."""
    _node_modules()
    node = shutil.which("node")
    if node is None:
        raise AssertionError("node is missing: the sign-in tests need Node.js")
    secret = secrets.token_urlsafe(24)
    for attempt in range(1, ATTEMPTS + 1):
        process = subprocess.Popen(
            [node, "provider.mjs", redirect_uri, secret],
            cwd=OIDC_DIR,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert process.stdout is not None
            ready, _, _ = select.select([process.stdout], [], [], ANNOUNCE_WITHIN)
            line = process.stdout.readline() if ready else ""  # printed once it listens
            if line:
                yield RunningProvider(json.loads(line)["issuer"], CLIENT_ID, secret)
                return
            if not ready and attempt < ATTEMPTS:
                continue
            status = process.poll()
            raise AssertionError(
                f"oidc-provider exited {status} before listening"
                if status is not None
                else f"oidc-provider did not listen within {ANNOUNCE_WITHIN:.0f} s"
                f" ({ATTEMPTS} attempts)"
            )
        finally:
            _stop(process)
    raise AssertionError("unreachable")


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()


def count_fetches(monkeypatch: pytest.MonkeyPatch, delay: float = 0.0) -> list[tuple[str, str]]:
    """What every OidcClient fetches from its issuer from now on, as (url, what),
    each fetch `delay` seconds late (long enough for concurrent callers to arrive)."""
    fetched: list[tuple[str, str]] = []
    original = OidcClient._get_json

    async def counting(self: OidcClient, url: str, what: str) -> dict[str, Any]:
        fetched.append((url, what))
        await asyncio.sleep(delay)
        return await original(self, url, what)

    monkeypatch.setattr(OidcClient, "_get_json", counting)
    return fetched

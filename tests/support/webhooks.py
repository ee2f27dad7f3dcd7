"""Forge webhook deliveries for tests: fixtures filled in and signed like the forge does."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "webhooks"
ZERO = "0" * 40


@dataclass
class Prepared:
    route: str
    headers: dict[str, str]
    body: bytes


def hmac_hex(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def sign(forge: str, headers: dict[str, str], body: bytes, secret: str) -> None:
    """Add the authentication header each forge sends."""
    if forge == "github":
        headers["X-Hub-Signature-256"] = "sha256=" + hmac_hex(secret, body)
    elif forge == "gitlab":
        headers["X-Gitlab-Token"] = secret
    elif forge == "gitea":
        headers["X-Gitea-Signature"] = hmac_hex(secret, body)
        if "X-Forgejo-Event" in headers:
            headers["X-Forgejo-Signature"] = hmac_hex(secret, body)
    elif forge == "bitbucket":
        headers["X-Hub-Signature"] = "sha256=" + hmac_hex(secret, body)
    else:
        raise ValueError(forge)


def delivery(
    forge: str,
    name: str,
    *,
    repo: str = "acme/terraform-null-hello",
    tag: str = "v1.0.0",
    before: str = "1" * 40,
    after: str = "2" * 40,
    delivery_id: str | None = None,
    secret: str | None = None,
) -> Prepared:
    """Fixture `FIXTURES/forge/name.json` with placeholders filled, signed with `secret`."""
    owner, _, short = repo.partition("/")
    text = (FIXTURES / forge / f"{name}.json").read_text()
    for key, value in {
        "@REPO@": repo,
        "@OWNER@": owner,
        "@NAME@": short,
        "@TAG@": tag,
        "@BEFORE@": before,
        "@AFTER@": after,
        "@DELIVERY@": delivery_id or str(uuid.uuid4()),
    }.items():
        text = text.replace(key, value)
    data = json.loads(text)
    body = json.dumps(data["payload"], indent=2).encode()
    headers = dict(data["headers"])
    if secret is not None:
        sign(forge, headers, body, secret)
    return Prepared(f"/webhooks/{forge}", headers, body)

"""Gitea and Forgejo webhooks (docs.gitea.com "Webhooks"; Forgejo keeps the
format and adds `X-Forgejo-*` names for each `X-Gitea-*` header).

Headers: `X-Gitea-Event` / `X-Forgejo-Event`, `X-Gitea-Delivery` /
`X-Forgejo-Delivery`, `X-Gitea-Signature` / `X-Forgejo-Signature`: the bare
hex HMAC-SHA256 of the raw body. Events used:

- `push` with `ref: refs/tags/NAME`, `before` / `after`.
- `create` / `delete` with `ref_type: tag` and `ref` the bare tag name.
- `release` with `action` (`published`, `updated`, `deleted`) and
  `release.tag_name`.

Gitea's "Test delivery" button sends a `push` for a branch: it is answered
2xx and ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gitreg.webhooks.events import (
    TAG_REF,
    Delivery,
    change_from_shas,
    created_or_deleted_tag,
    ignore,
    release_delivery,
    tag_delivery,
    text,
)
from gitreg.webhooks.signatures import hex_signature_ok


def _header(headers: Mapping[str, str], suffix: str) -> str:
    """Forgejo's name first, then Gitea's (Forgejo sends both)."""
    return headers.get(f"x-forgejo-{suffix}") or headers.get(f"x-gitea-{suffix}", "")


class Gitea:
    name = "gitea"

    def verify(self, headers: Mapping[str, str], body: bytes, secret: str) -> bool:
        return hex_signature_ok(secret, body, _header(headers, "signature"))

    def delivery_id(self, headers: Mapping[str, str]) -> str:
        return _header(headers, "delivery")

    def repository(self, payload: Any) -> str | None:
        return text(payload, "repository", "full_name")

    def read(self, headers: Mapping[str, str], payload: Any) -> Delivery:
        event = _header(headers, "event")[:60]
        if event == "push":
            ref = text(payload, "ref") or ""
            if not ref.startswith(TAG_REF):
                return ignore(self.name, event, "not a tag push")
            change = change_from_shas(
                ref[len(TAG_REF) :], text(payload, "before"), text(payload, "after")
            )
            return tag_delivery(self.name, event, [change])
        if event in ("create", "delete"):
            return created_or_deleted_tag(self.name, event, payload)
        if event == "release":
            release = text(payload, "action") or ""
            if release not in ("published", "updated"):
                return ignore(self.name, event, f"release action {release[:40]!r} is not used")
            tag = text(payload, "release", "tag_name") or ""
            return release_delivery(self.name, event, tag, release)
        return ignore(self.name, event, "event not used by gitreg")

"""GitHub webhooks (docs.github.com: "Webhook events and payloads").

Headers: `X-GitHub-Event` (event name), `X-GitHub-Delivery` (a GUID that a
redelivery reuses), `X-Hub-Signature-256` (`sha256=` + hex HMAC-SHA256 of the
raw body). Events used:

- `push` with `ref: refs/tags/NAME`: `created`, `deleted` and `forced` flags,
  `before`/`after` shas (all zeros for an absent side).
- `create` / `delete` with `ref_type: tag` and `ref` the bare tag name.
- `release` with `action` and `release.tag_name` (kept for providers).
- `ping` when the hook is created (`zen`, `hook_id`, `hook`).

GitHub sends no push event at all when more than three tags are pushed at
once; the reconcile loop covers that.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gitreg.webhooks.events import (
    TAG_REF,
    Action,
    Delivery,
    TagChange,
    created_or_deleted_tag,
    flag,
    ignore,
    release_delivery,
    tag_delivery,
    text,
)
from gitreg.webhooks.signatures import hex_signature_ok

# `release` actions after which the tag's release exists and is visible.
RELEASE_ACTIONS = ("published", "created", "released", "prereleased")


class GitHub:
    name = "github"

    def verify(self, headers: Mapping[str, str], body: bytes, secret: str) -> bool:
        return hex_signature_ok(secret, body, headers.get("x-hub-signature-256"), "sha256=")

    def delivery_id(self, headers: Mapping[str, str]) -> str:
        return headers.get("x-github-delivery", "")

    def repository(self, payload: Any) -> str | None:
        return text(payload, "repository", "full_name")

    def read(self, headers: Mapping[str, str], payload: Any) -> Delivery:
        event = headers.get("x-github-event", "")
        if event == "ping":
            return Delivery(self.name, event, "ping", note=text(payload, "zen") or "")
        if event == "push":
            ref = text(payload, "ref") or ""
            if not ref.startswith(TAG_REF):
                return ignore(self.name, event, "not a tag push")
            tag = ref[len(TAG_REF) :]
            # Neither created nor deleted: the tag was moved (`forced` is set).
            moved: Action = "deleted" if flag(payload, "deleted") else "moved"
            if flag(payload, "created"):
                moved = "created"
            return tag_delivery(self.name, event, [TagChange(tag, moved)])
        if event in ("create", "delete"):
            return created_or_deleted_tag(self.name, event, payload)
        if event == "release":
            release = text(payload, "action") or ""
            tag = text(payload, "release", "tag_name") or ""
            if release not in RELEASE_ACTIONS:
                return ignore(self.name, event, f"release action {release[:40]!r} is not used")
            return release_delivery(self.name, event, tag, release)
        return ignore(self.name, event[:60], "event not used by gitreg")

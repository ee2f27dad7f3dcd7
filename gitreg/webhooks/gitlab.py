"""GitLab webhooks (docs.gitlab.com: "Webhook events").

Headers: `X-Gitlab-Event` (`Tag Push Hook`, `Release Hook`, `Push Hook`,
`System Hook`, ...), `X-Gitlab-Token` (the secret itself, compared in
constant time), `Idempotency-Key` (same on retries, GitLab 17.4+) or else
`X-Gitlab-Event-UUID` as the delivery id.

- Tag Push Hook: `object_kind: tag_push`, `ref: refs/tags/NAME`, `before` /
  `after` (all zeros for an absent side), `project.path_with_namespace`.
  Not sent when one push changes more than three tags (the reconcile loop covers them).
- Release Hook: `object_kind: release`, `action` (`create`, `update`,
  `delete`), `tag`.
- System hooks send tag pushes with `X-Gitlab-Event: System Hook` and the same
  `object_kind`, so the kind in the body decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gitreg.webhooks.events import (
    TAG_REF,
    Delivery,
    change_from_shas,
    ignore,
    release_delivery,
    tag_delivery,
    text,
)
from gitreg.webhooks.signatures import token_ok


class GitLab:
    name = "gitlab"

    def verify(self, headers: Mapping[str, str], body: bytes, secret: str) -> bool:
        return token_ok(secret, headers.get("x-gitlab-token"))

    def delivery_id(self, headers: Mapping[str, str]) -> str:
        return headers.get("idempotency-key") or headers.get("x-gitlab-event-uuid", "")

    def repository(self, payload: Any) -> str | None:
        return text(payload, "project", "path_with_namespace")

    def read(self, headers: Mapping[str, str], payload: Any) -> Delivery:
        event = headers.get("x-gitlab-event", "")[:60]
        kind = text(payload, "object_kind") or ""
        if kind == "tag_push":
            ref = text(payload, "ref") or ""
            if not ref.startswith(TAG_REF):
                return ignore(self.name, event, "tag push without a tag ref")
            change = change_from_shas(
                ref[len(TAG_REF) :], text(payload, "before"), text(payload, "after")
            )
            return tag_delivery(self.name, event, [change])
        if kind == "release":
            action = text(payload, "action") or ""
            if action not in ("create", "update"):
                return ignore(self.name, event, f"release action {action[:40]!r} is not used")
            return release_delivery(self.name, event, text(payload, "tag") or "", action)
        return ignore(self.name, event, f"object kind {kind[:40]!r} not used by gitreg")

"""Bitbucket Cloud and Bitbucket Data Center webhooks, on one route.

Both sign with `X-Hub-Signature: sha256=<hex HMAC-SHA256 of the raw body>`
and name the event in `X-Event-Key`.

Cloud ("Event payloads", support.atlassian.com): `repo:push` with
`push.changes[]`, each with `new` / `old` (null for an absent side) carrying
`type` (`tag`, `branch`, ...) and `name`; the repository is
`repository.full_name` (`workspace/slug`). Delivery id: `X-Request-UUID`.
Tags created in Bitbucket's web UI have been seen to arrive with an empty
`changes` list, and long pushes set `truncated`: both still trigger a sync.

Data Center ("Event payload", confluence.atlassian.com): `repo:refs_changed`
with `changes[]` of `ref {id, displayId, type: TAG|BRANCH}`, `fromHash`,
`toHash`, `type` (`ADD`, `UPDATE`, `DELETE`); the repository is
`repository.project.key` + `/` + `repository.slug`. The "Test connection"
button sends `diagnostics:ping`. Delivery id: `X-Request-Id`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gitreg.webhooks.events import (
    TAG_REF,
    Action,
    Delivery,
    TagChange,
    flag,
    ignore,
    objects,
    tag_delivery,
    text,
)
from gitreg.webhooks.signatures import hex_signature_ok

_DC_ACTIONS: dict[str, Action] = {"ADD": "created", "DELETE": "deleted", "UPDATE": "moved"}


class Bitbucket:
    name = "bitbucket"

    def verify(self, headers: Mapping[str, str], body: bytes, secret: str) -> bool:
        return hex_signature_ok(secret, body, headers.get("x-hub-signature"), "sha256=")

    def delivery_id(self, headers: Mapping[str, str]) -> str:
        return headers.get("x-request-uuid") or headers.get("x-request-id", "")

    def repository(self, payload: Any) -> str | None:
        full_name = text(payload, "repository", "full_name")
        if full_name:
            return full_name
        key = text(payload, "repository", "project", "key")
        slug = text(payload, "repository", "slug")
        return f"{key}/{slug}" if key and slug else None

    def read(self, headers: Mapping[str, str], payload: Any) -> Delivery:
        event = headers.get("x-event-key", "")[:60]
        if event == "diagnostics:ping":
            return Delivery(self.name, event, "ping")
        if event == "repo:push":
            return self._cloud_push(event, payload)
        if event == "repo:refs_changed":
            return self._dc_refs_changed(event, payload)
        return ignore(self.name, event, "event not used by gitreg")

    def _cloud_push(self, event: str, payload: Any) -> Delivery:
        changes = objects(payload, "push", "changes")
        tags: list[TagChange] = []
        unknown = not changes
        for change in changes:
            new, old = change.get("new"), change.get("old")
            side = new if isinstance(new, Mapping) else old
            if not isinstance(side, Mapping) or side.get("type") != "tag":
                continue
            action: Action = "created" if not old else "deleted" if not new else "moved"
            tags.append(TagChange(text(side, "name") or "", action))
            unknown = unknown or flag(change, "truncated")
        if not tags and not unknown:
            return ignore(self.name, event, "no tag changed")
        return tag_delivery(self.name, event, tags, "ref details incomplete" if unknown else "")

    def _dc_refs_changed(self, event: str, payload: Any) -> Delivery:
        tags: list[TagChange] = []
        for change in objects(payload, "changes"):
            ref_id = text(change, "ref", "id") or text(change, "refId") or ""
            if text(change, "ref", "type") != "TAG" and not ref_id.startswith(TAG_REF):
                continue
            name = text(change, "ref", "displayId") or ref_id[len(TAG_REF) :]
            tags.append(TagChange(name, _DC_ACTIONS.get(text(change, "type") or "", "changed")))
        if not tags:
            return ignore(self.name, event, "no tag changed")
        return tag_delivery(self.name, event, tags)

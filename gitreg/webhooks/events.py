"""What a forge delivery means to gitreg, independent of the forge.

Each forge module turns (headers, JSON payload) into a `Delivery`. Only the
repository's identity and the fact that tags changed matter: the job fetches
from the remote gitreg has configured, so shas, clone URLs and commit
lists in a payload are never used for anything but the job's description.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from gitreg.errors import BadRequest
from gitreg.versions import unsafe_ref_reason

ZERO_SHA = "0" * 40
TAG_REF = "refs/tags/"

Kind = Literal["ping", "tags", "release", "ignore"]
Action = Literal["created", "deleted", "moved", "changed"]


@dataclass(frozen=True)
class TagChange:
    tag: str
    action: Action

    def __str__(self) -> str:
        return f"{self.action} {self.tag}"


@dataclass(frozen=True)
class Delivery:
    """One verified webhook, reduced to what gitreg acts on."""

    forge: str
    event: str
    kind: Kind
    changes: tuple[TagChange, ...] = field(default=())
    note: str = ""  # why it is ignored, or what the release event was

    def describe(self) -> str:
        """One line for the job's reason, e.g. `github push: created v1.2.0`."""
        what = ", ".join(str(c) for c in self.changes[:5])
        if len(self.changes) > 5:
            what += f" and {len(self.changes) - 5} more"
        text = f"{self.forge} {self.event}"
        if what:
            text += f": {what}"
        if self.note:
            text += f" ({self.note})"
        return text


def ignore(forge: str, event: str, why: str) -> Delivery:
    return Delivery(forge, event, "ignore", note=why)


def tag_delivery(forge: str, event: str, changes: list[TagChange], note: str = "") -> Delivery:
    """A delivery about tags; tags with hostile names are dropped."""
    safe = tuple(c for c in changes if unsafe_ref_reason(c.tag) is None)
    if changes and not safe:
        return ignore(forge, event, "no usable tag names")
    return Delivery(forge, event, "tags", safe, note)


def release_delivery(forge: str, event: str, tag: str, action: str) -> Delivery:
    """A release was published for `tag`: the tag exists, so sync (providers
    will read releases later; modules only need the tag)."""
    tags = tag_delivery(forge, event, [TagChange(tag, "changed")], f"release {action}")
    if tags.kind != "tags":
        return tags
    return Delivery(forge, event, "release", tags.changes, tags.note)


def change_from_shas(tag: str, before: str | None, after: str | None) -> TagChange:
    """Classify a ref update the way git's hooks report it (zero sha = absent)."""
    if not before or before == ZERO_SHA:
        return TagChange(tag, "created")
    if not after or after == ZERO_SHA:
        return TagChange(tag, "deleted")
    return TagChange(tag, "moved")


class Forge(Protocol):
    """One forge's webhook dialect. `headers` lookups use lower-case names."""

    name: str

    def verify(self, headers: Mapping[str, str], body: bytes, secret: str) -> bool:
        """The delivery carries this forge's proof of `secret` (constant time)."""
        ...

    def delivery_id(self, headers: Mapping[str, str]) -> str:
        """The forge's id for this delivery, stable across its redeliveries."""
        ...

    def repository(self, payload: Any) -> str | None:
        """The repository's name on the forge (`OWNER/REPO`), if the payload has one."""
        ...

    def read(self, headers: Mapping[str, str], payload: Any) -> Delivery:
        """Interpret a verified delivery."""
        ...


# -- typed access to untrusted JSON ------------------------------------------


def dig(payload: Any, *path: str) -> Any:
    """`payload[a][b]...`, or None when any step is missing or not an object."""
    node = payload
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def text(payload: Any, *path: str) -> str | None:
    """A string field; None when absent. A present non-string is malformed."""
    value = dig(payload, *path)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"payload field {'.'.join(path)} must be a string")
    if not value.isascii():
        # JSON may escape a lone surrogate (`"\ud800"`), which no database or
        # log can store: refuse them here rather than fail later with a 500.
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise BadRequest(f"payload field {'.'.join(path)} is not valid Unicode") from exc
    return value


def flag(payload: Any, *path: str) -> bool:
    return dig(payload, *path) is True


def objects(payload: Any, *path: str) -> list[Mapping[str, Any]]:
    """A list of objects; None/absent is empty, anything else is malformed."""
    value = dig(payload, *path)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise BadRequest(f"payload field {'.'.join(path)} must be a list of objects")
    return value


def created_or_deleted_tag(forge: str, event: str, payload: Any) -> Delivery:
    """GitHub's and Gitea's `create` / `delete` events: any ref, tags among them
    (`ref_type`), with `ref` the bare tag name."""
    if text(payload, "ref_type") != "tag":
        return ignore(forge, event, "not a tag")
    action: Action = "created" if event == "create" else "deleted"
    return tag_delivery(forge, event, [TagChange(text(payload, "ref") or "", action)])

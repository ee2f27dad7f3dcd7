"""What a token or a grant allows, ordered: `admin` includes `publish`, which
includes `read`."""

from __future__ import annotations

from enum import IntEnum

from gitreg.errors import BadRequest


class Scope(IntEnum):
    read = 1
    publish = 2
    admin = 3

    @classmethod
    def parse(cls, text: str) -> Scope:
        try:
            return cls[text.strip().lower()]
        except KeyError as exc:
            raise BadRequest(f"scope must be read, publish or admin, not {text[:40]!r}") from exc

"""Small response helpers shared by the protocol modules."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gitreg.canonical_json import json_bytes

JSON = "application/json"


def json_response(
    body: bytes, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(body, status_code=status, media_type=JSON, headers=headers)


@dataclass(frozen=True, slots=True)
class CachedJson:
    """A metadata answer serialised once, with its ETag and its 200 response
    built once. A Starlette `Response` holds no per-request state, so the
    same object answers every request until a publish replaces this entry.

    The 304 is built when asked for: clients of the registry protocols rarely
    revalidate, and a prebuilt one would be a fifth of each cached `versions`
    entry (docs/performance.md, "Memory of one worker")."""

    body: bytes
    etag: str
    full: Response

    @classmethod
    def of(cls, data: Any) -> CachedJson:
        body = json_bytes(data)
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        return cls(body, etag, json_response(body, headers=_validators(etag)))

    def response(self, request: Request) -> Response:
        """200 with the body, or 304 when the client already holds this version."""
        for name, value in request.scope["headers"]:
            if name == b"if-none-match" and value.decode("latin-1") == self.etag:
                return Response(status_code=304, headers=_validators(self.etag))
        return self.full


def _validators(etag: str) -> dict[str, str]:
    # `no-cache`: clients may keep it but must revalidate, since a publish changes it.
    return {"ETag": etag, "Cache-Control": "no-cache"}


def error_body(*messages: str) -> bytes:
    return json_bytes({"errors": list(messages)})

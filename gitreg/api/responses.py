"""Small response helpers shared by the protocol modules."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

JSON = "application/json"


def json_bytes(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()


def json_response(
    body: bytes, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(body, status_code=status, media_type=JSON, headers=headers)


@dataclass(frozen=True)
class CachedJson:
    """A metadata answer serialised once, with its ETag computed once (H2)."""

    body: bytes
    etag: str

    @classmethod
    def of(cls, data: Any) -> CachedJson:
        body = json_bytes(data)
        return cls(body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"')

    def response(self, request: Request) -> Response:
        """200 with the body, or 304 when the client already holds this version.
        `no-cache`: clients may keep it but must revalidate, since a publish changes it."""
        headers = {"ETag": self.etag, "Cache-Control": "no-cache"}
        if request.headers.get("if-none-match") == self.etag:
            return Response(status_code=304, headers=headers)
        return json_response(self.body, headers=headers)


def error_body(*messages: str) -> bytes:
    return json_bytes({"errors": list(messages)})

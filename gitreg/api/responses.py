"""Small response helpers shared by the protocol modules."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response

JSON = "application/json"


def json_bytes(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()


def json_response(
    body: bytes, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(body, status_code=status, media_type=JSON, headers=headers)


def error_body(*messages: str) -> bytes:
    return json_bytes({"errors": list(messages)})

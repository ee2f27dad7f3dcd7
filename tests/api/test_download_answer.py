"""The module download's 204 is built directly (gitreg/modules/http.py): it must
send exactly what Starlette's Response sends for it."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message

from gitreg.modules.http import _download_response

LOCATION = "https://reg.example.com/archives/" + "ab" * 32 + ".tar.gz//modules/vpc"


def _request(headers: list[tuple[bytes, bytes]]) -> Request:
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers})


def _sent(response: Response) -> list[Message]:
    messages: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        messages.append(message)

    scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
    asyncio.run(response(scope, receive, send))
    return messages


def test_the_204_is_what_a_starlette_response_sends() -> None:
    made = _download_response(_request([(b"accept", b"*/*")]), LOCATION)
    plain = Response(status_code=204, headers={"X-Terraform-Get": LOCATION})
    assert _sent(made) == _sent(plain)
    assert made.headers == plain.headers and made.background is None


def test_a_json_client_still_gets_200_with_the_location() -> None:
    made = _download_response(_request([(b"accept", b"application/json")]), LOCATION)
    assert made.status_code == 200 and made.headers["x-terraform-get"] == LOCATION
    assert b'"location"' in made.body

"""The publish options body of a provider upload is read up to its 4 KiB cap,
never whole: an endless body is cut off with 413."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.requests import Request

from gitreg.errors import PayloadTooLarge
from gitreg.providers.http import MAX_PUBLISH_BODY, _publish_options


def test_an_endless_publish_body_is_cut_off_at_the_cap() -> None:
    sent = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        sent += 1
        if sent > 100:  # far past the cap: the whole body is being read
            raise AssertionError("publish options read past their cap")
        return {"type": "http.request", "body": b"x" * 1024, "more_body": True}

    request = Request({"type": "http", "method": "POST", "headers": []}, receive)
    with pytest.raises(PayloadTooLarge):
        asyncio.run(_publish_options(request))
    assert sent * 1024 <= MAX_PUBLISH_BODY + 1024

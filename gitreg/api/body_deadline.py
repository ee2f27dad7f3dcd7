"""Deadlines for request bodies, for every route that reads one.

uvicorn gives a request no deadline once its head is complete: a client that
declares a body and then sends a byte now and then keeps its connection (and a
place under `max_connections`) for as long as it likes. This middleware times
what a route spends waiting for the client in `receive()`, and answers 408
JSON with `Connection: close` once a body is too slow:

- no wait for the next piece may last longer than `header_timeout`;
- the body as a whole gets `header_timeout` seconds plus one second per
  `min_body_rate` bytes received, so a small body (a webhook, a form, a token
  request) must be complete within about `header_timeout`, and a large upload
  only has to keep up `min_body_rate` on average.

Time the app spends between reads (writing to disk or S3) is its own, not the
client's, and is not counted. GET and HEAD, which no route reads a body of, are
passed through untouched; so is everything once the response has started, when
a 408 could no longer be sent (what is left of the body then counts against the
next request head's deadline, in gitreg/server/limits.py).
"""

from __future__ import annotations

import asyncio
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gitreg.errors import RequestTimeout

_CLOSE = (b"connection", b"close")
_NO_BODY = frozenset(("GET", "HEAD"))


class BodyDeadline:
    def __init__(self, app: ASGIApp, timeout: float, min_rate: int) -> None:
        self.app = app
        self.timeout = timeout
        self.min_rate = min_rate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _NO_BODY:
            await self.app(scope, receive, send)
            return
        timeout, rate = self.timeout, self.min_rate
        waited, received = 0.0, 0
        # The body is still arriving; a 408 was raised; the response has started.
        reading, timed_out, responding = True, False, False

        async def receiving() -> Message:
            nonlocal waited, received, reading, timed_out
            if not reading or responding:
                return await receive()
            budget = min(timeout, timeout + received / rate - waited)
            started = time.monotonic()
            try:
                if budget <= 0:
                    raise TimeoutError
                async with asyncio.timeout(budget):
                    message = await receive()
            except TimeoutError:
                if responding:  # started meanwhile (a concurrent reader)
                    return await receive()
                reading, timed_out = False, True
                raise RequestTimeout(
                    f"request body too slow: it gets {timeout:g} s plus 1 s per {rate} bytes,"
                    f" with no pause over {timeout:g} s"
                ) from None
            waited += time.monotonic() - started
            received += len(message.get("body", b""))
            if not message.get("more_body", False):  # the end, or http.disconnect
                reading = False
            return message

        async def sending(message: Message) -> None:
            nonlocal responding
            if message["type"] == "http.response.start":
                responding = True
                if timed_out:
                    message["headers"] = [*message.get("headers", ()), _CLOSE]
            await send(message)

        await self.app(scope, receiving, sending)

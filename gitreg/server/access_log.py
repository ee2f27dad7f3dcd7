"""One access line per request, with a request id (docs/operations.md).

A pure ASGI middleware, cheaper than Starlette's `BaseHTTPMiddleware` and than
uvicorn's access log it replaces: it notes the status and the bytes as the
response goes out and writes one line when it is done. The request id comes
from `X-Request-Id` when the client (or the proxy in front) sent a sane one,
and is made up otherwise; it is sent back in the response and set as the log
context, so every line the request causes carries it. The route is the
template (`/v1/modules/{namespace}/{name}/{system}/versions`), never the raw
path, whose query may hold a signature. The token is named by its id only.
"""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gitreg import logs
from gitreg.metrics import service as metrics

log = logging.getLogger("gitreg.access")
_SANE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            text = str(value.decode("latin-1"))
            # Never log an id shaped like a credential (a `gitreg_` token pasted
            # into the header): every line of the request would carry it.
            if _SANE_ID.match(text) and logs.redact(text) == text:
                return text
            break
    return _made_up_id()


# Made-up ids: 8 random bytes each, cut from one os.urandom read per 64 ids
# rather than a getrandom call per request (docs/performance.md). `list.pop`
# is atomic, so threads never share an id.
_spare_ids: list[str] = []


def _made_up_id() -> str:
    try:
        return _spare_ids.pop()
    except IndexError:
        text = os.urandom(8 * 64).hex()
        _spare_ids.extend(text[i : i + 16] for i in range(16, len(text), 16))
        return text[:16]


def _route(scope: Scope) -> str:
    path: Any = getattr(scope.get("route"), "path", None)
    return str(path) if path else metrics.UNMATCHED


class AccessLog:
    def __init__(self, app: ASGIApp, enabled: bool = True) -> None:
        self.app = app
        self.enabled = enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = _request_id(scope)
        token = logs.request_id.set(rid)
        started = time.perf_counter()
        status, size = 500, 0  # closure cells, not a dict per request
        header = (b"x-request-id", rid.encode("latin-1"))

        async def sending(message: Message) -> None:
            nonlocal status, size
            kind = message["type"]
            if kind == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), header]
            elif kind == "http.response.body":
                size += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - started
            route = _route(scope)
            # Metrics are observed here once per request, on the same template
            # as the access line (never the raw path: bounded cardinality).
            metrics.request(route, scope["method"], status, seconds)
            if self.enabled and log.isEnabledFor(logging.INFO):
                self._line(scope, route, status, size, seconds)
            logs.request_id.reset(token)

    @staticmethod
    def _line(scope: Scope, route: str, status: int, size: int, seconds: float) -> None:
        client = scope.get("client")
        host = client[0] if client else None
        token_id = (scope.get("state") or {}).get("token_id")
        method = scope["method"]
        # Written directly when gitreg's own handler is the only one: a LogRecord
        # and json.dumps per request are a large share of a metadata answer's
        # cost (docs/performance.md).
        if logs.access_json(method, route, status, seconds, size, host, token_id):
            return
        if logs.access_text(method, route, status, seconds, size, host, token_id):
            return
        fields = {
            "method": method,
            "route": route,
            "status": status,
            "duration_ms": round(seconds * 1000, 2),
            "bytes": size,
            "client": host,
            "token_id": token_id,
        }
        log.info("%s %s %d %.1fms", method, route, status, seconds * 1000, extra={"fields": fields})

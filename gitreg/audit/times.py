"""Times as the audit log shows and reads them."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from gitreg.errors import BadRequest

_AGO = re.compile(r"^(\d{1,6})([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_since(text: str, now: float | None = None) -> float:
    """`24h`, `7d` (that long ago) or an ISO 8601 date or time (UTC unless it says)."""
    text = text.strip()
    match = _AGO.match(text)
    if match:
        return (now if now is not None else time.time()) - int(match[1]) * _UNITS[match[2]]
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise BadRequest(
            f"since must look like 24h, 7d or 2026-11-28T10:00:00Z, not {text[:40]!r}"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()

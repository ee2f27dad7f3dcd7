"""The one JSON encoding gitreg writes: compact and with sorted keys.

Sorted keys make equal documents equal bytes, so an ETag or a file in a
static mirror export is the same for the same content. Pure and HTTP-free:
both the protocol modules (`gitreg/api/`, `gitreg/webhooks/`) and the mirror
domain, which caches and exports finished bodies, use it.
"""

from __future__ import annotations

import json
from typing import Any


def json_bytes(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()

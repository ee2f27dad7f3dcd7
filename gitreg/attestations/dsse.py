"""DSSE envelopes (github.com/secure-systems-lab/dsse, protocol v1).

The signature covers PAE(payloadType, payload) =
`"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, lengths in ASCII
decimal, never the JSON around it; the envelope carries the payload and each
signature in standard base64.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from typing import Any

from gitreg.errors import BadRequest

IN_TOTO = "application/vnd.in-toto+json"


def pae(payload_type: str, payload: bytes) -> bytes:
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def envelope(payload: bytes, keyid: str, sign: Callable[[bytes], bytes]) -> dict[str, Any]:
    signature = sign(pae(IN_TOTO, payload))
    return {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": IN_TOTO,
        "signatures": [{"keyid": keyid, "sig": base64.b64encode(signature).decode()}],
    }


def open_envelope(
    data: bytes, verifiers: Mapping[str, Callable[[bytes, bytes], bool]]
) -> tuple[bytes, str]:
    """The payload and the key id of a signature that verifies over its PAE with
    the verifier of that key id; BadRequest for anything else."""
    try:
        document = json.loads(data)
        payload = base64.b64decode(document["payload"], validate=True)
        payload_type = document["payloadType"]
        signatures = document["signatures"]
    except (ValueError, KeyError, TypeError, binascii.Error, RecursionError) as exc:
        # RecursionError: JSON nested deeper than the parser goes.
        raise BadRequest(f"not a DSSE envelope: {type(exc).__name__}: {exc}"[:300]) from None
    if payload_type != IN_TOTO:
        raise BadRequest(f"unexpected payload type {payload_type!r}")
    message = pae(payload_type, payload)
    for entry in signatures if isinstance(signatures, list) else []:
        if not isinstance(entry, dict):
            continue
        keyid, sig = entry.get("keyid"), entry.get("sig")
        verify = verifiers.get(keyid) if isinstance(keyid, str) else None
        if verify is None or not isinstance(sig, str):
            continue
        try:
            raw = base64.b64decode(sig, validate=True)
        except binascii.Error:
            continue
        if verify(raw, message):
            assert isinstance(keyid, str)
            return payload, keyid
    raise BadRequest("no signature of the envelope verifies with a key of the registry")

"""Independent checks written from the specifications, sharing no code with
gitreg: DSSE v1 (PAE), in-toto Statement v1 with SLSA Provenance v1, Go's
dirhash Hash1, RFC 6962 Merkle tree hashing and proofs, C2SP tlog-tiles paths
and C2SP signed-note checkpoints. `cryptography` checks the Ed25519
signatures; everything around them is here."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_public_key,
)


def pae(kind: str, body: bytes) -> bytes:
    """DSSE v1: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body."""
    t = kind.encode("utf-8")
    return b" ".join([b"DSSEv1", str(len(t)).encode(), t, str(len(body)).encode(), body])


def public_key(pem: str) -> Ed25519PublicKey:
    key = load_pem_public_key(pem.encode())
    assert isinstance(key, Ed25519PublicKey)
    return key


def dsse_payload(envelope: dict[str, Any], keys: dict[str, str]) -> dict[str, Any]:
    """The statement of an envelope whose signature verifies with `keys`
    (keyid -> PEM); raises otherwise."""
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    body = base64.standard_b64decode(envelope["payload"])
    ok = False
    for sig in envelope["signatures"]:
        pem = keys.get(sig["keyid"])
        if pem is None:
            continue
        der = public_key(pem).public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
        assert hashlib.sha256(der).hexdigest() == sig["keyid"]
        public_key(pem).verify(
            base64.standard_b64decode(sig["sig"]), pae(envelope["payloadType"], body)
        )
        ok = True
    assert ok, "no signature by a listed key"
    statement: dict[str, Any] = json.loads(body)
    check_statement(statement)
    return statement


def check_statement(statement: dict[str, Any]) -> None:
    """in-toto Statement v1 and the required fields of SLSA Provenance v1."""
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert isinstance(statement["subject"], list) and statement["subject"]
    for subject in statement["subject"]:
        assert isinstance(subject["name"], str)
        assert isinstance(subject["digest"], dict) and subject["digest"]
        assert all(isinstance(v, str) for v in subject["digest"].values())
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    predicate = statement["predicate"]
    build = predicate["buildDefinition"]
    assert isinstance(build["buildType"], str) and ":" in build["buildType"]
    assert isinstance(build["externalParameters"], dict)
    for dependency in build.get("resolvedDependencies", []):
        assert "uri" in dependency or "digest" in dependency
    assert isinstance(predicate["runDetails"]["builder"]["id"], str)


def dirhash_h1(root: Path) -> str:
    """Go's dirhash.HashDir(dir, "", Hash1) over regular files."""
    lines = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if path.is_file():
                rel = path.relative_to(root).as_posix()
                lines.append((rel, hashlib.sha256(path.read_bytes()).hexdigest()))
    lines.sort(key=lambda item: item[0])
    text = "".join(f"{digest}  {name}\n" for name, digest in lines)
    return "h1:" + base64.standard_b64encode(hashlib.sha256(text.encode()).digest()).decode()


def mth(leaves: list[bytes]) -> bytes:
    """RFC 6962 section 2.1, over the entries themselves."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def root_from_path(index: int, size: int, leaf_hash: bytes, path: list[bytes]) -> bytes:
    """Recompute the root from an RFC 6962 audit path, by the recursion of section 2.1.1."""
    if size == 1:
        assert not path
        return leaf_hash
    k = 1
    while k * 2 < size:
        k *= 2
    *inner, sibling = path
    if index < k:
        left = root_from_path(index, k, leaf_hash, inner)
        return hashlib.sha256(b"\x01" + left + sibling).digest()
    right = root_from_path(index - k, size - k, leaf_hash, inner)
    return hashlib.sha256(b"\x01" + sibling + right).digest()


def consistent(entries: list[bytes], old: int, proof: list[bytes]) -> bool:
    """RFC 6962 section 2.1.2: the proof PROOF(old, D[n]) of these entries is
    exactly the one the definition gives."""

    def subproof(m: int, leaves: list[bytes], complete: bool) -> list[bytes]:
        n = len(leaves)
        if m == n:
            return [] if complete else [mth(leaves)]
        k = 1
        while k * 2 < n:
            k *= 2
        if m <= k:
            return [*subproof(m, leaves[:k], complete), mth(leaves[k:])]
        return [*subproof(m - k, leaves[k:], False), mth(leaves[:k])]

    return subproof(old, entries, True) == proof


def tile_path(level: str, n: int, width: int) -> str:
    """C2SP tlog-tiles: N in 3-digit groups, all but the last prefixed `x`."""
    groups = []
    while True:
        groups.append(f"{n % 1000:03d}")
        n //= 1000
        if n == 0:
            break
    groups.reverse()
    name = "/".join([*("x" + g for g in groups[:-1]), groups[-1]])
    return f"tile/{level}/{name}" + (f".p/{width}" if width < 256 else "")


def parse_bundle(data: bytes) -> list[bytes]:
    """tlog-tiles entry bundle: each entry behind a big-endian uint16 length."""
    out, at = [], 0
    while at < len(data):
        size = int.from_bytes(data[at : at + 2], "big")
        out.append(data[at + 2 : at + 2 + size])
        at += 2 + size
    assert at == len(data)
    return out


def open_checkpoint(note: bytes, pem: str) -> tuple[str, int, bytes]:
    """C2SP signed-note + tlog-checkpoint: (origin, size, root) if a signature
    by this Ed25519 key, named by the origin, verifies."""
    text, signatures = note.decode().split("\n\n", 1)
    body = (text + "\n").encode()
    origin, size, root = text.split("\n")[:3]
    raw = public_key(pem).public_bytes(Encoding.Raw, PublicFormat.Raw)
    key_id = hashlib.sha256(origin.encode() + b"\n\x01" + raw).digest()[:4]
    for line in signatures.rstrip("\n").split("\n"):
        assert line.startswith("\u2014 ")
        name, encoded = line[2:].rsplit(" ", 1)
        blob = base64.standard_b64decode(encoded)
        if name == origin and blob[:4] == key_id:
            public_key(pem).verify(blob[4:], body)
            return origin, int(size), base64.standard_b64decode(root)
    raise AssertionError("no signature by this key")

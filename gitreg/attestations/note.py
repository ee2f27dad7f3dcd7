"""Checkpoints (C2SP tlog-checkpoint) as signed notes (C2SP signed-note).

The note's text is the origin line, the tree size in decimal and the root hash
in standard base64, each ending in a newline. After a blank line each
signature is a line `— <key name> <base64(key hash || signature)>`: the key
name is the origin, the 4-byte key hash is the first bytes of
SHA-256(name || "\\n" || 0x01 || Ed25519 public key), and the Ed25519
signature covers the text. A verifier key is written
`<name>+<hex key hash>+<base64(0x01 || public key)>`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from gitreg.errors import BadRequest

ED25519 = b"\x01"
_DASH = "\u2014 "


def key_hash(name: str, public_raw: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + ED25519 + public_raw).digest()[:4]


def verifier_key(name: str, public_raw: bytes) -> str:
    encoded = base64.b64encode(ED25519 + public_raw).decode()
    return f"{name}+{key_hash(name, public_raw).hex()}+{encoded}"


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes

    def text(self) -> bytes:
        return f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode()}\n".encode()


def sign(checkpoint: Checkpoint, public_raw: bytes, sign: Callable[[bytes], bytes]) -> bytes:
    text = checkpoint.text()
    blob = key_hash(checkpoint.origin, public_raw) + sign(text)
    line = f"{_DASH}{checkpoint.origin} {base64.b64encode(blob).decode()}\n"
    return text + b"\n" + line.encode()


def open_note(
    note: bytes, publics: list[bytes], verify: Callable[[bytes, bytes, bytes], bool]
) -> Checkpoint:
    """The checkpoint of a note that one of `publics` (raw Ed25519 keys) signed;
    `verify(public, signature, text)`. BadRequest for anything else."""
    try:
        decoded = note.decode()
    except UnicodeDecodeError:
        raise BadRequest("the checkpoint is not UTF-8") from None
    text, sep, signatures = decoded.rpartition("\n\n")
    if not sep or not signatures.endswith("\n"):
        raise BadRequest("the checkpoint is not a signed note")
    body = (text + "\n").encode()
    lines = text.split("\n")
    if len(lines) < 3 or not lines[1].isdigit():
        raise BadRequest("the checkpoint has no origin, size and root")
    try:
        root = base64.b64decode(lines[2], validate=True)
    except binascii.Error:
        raise BadRequest("the checkpoint's root hash is not base64") from None
    checkpoint = Checkpoint(lines[0], int(lines[1]), root)
    for line in signatures[:-1].split("\n"):
        if not line.startswith(_DASH):
            raise BadRequest("a signature line of the checkpoint is malformed")
        name, _, encoded = line.removeprefix(_DASH).rpartition(" ")
        try:
            blob = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            continue
        for public in publics:
            mine = name == checkpoint.origin and blob[:4] == key_hash(name, public)
            if mine and verify(public, blob[4:], body):
                return checkpoint
    raise BadRequest("no signature of the checkpoint verifies with a key of the registry")

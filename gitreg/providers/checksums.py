"""SHA256SUMS documents, exactly as the Terraform client reads them.

Each line is `<64 lower-case hex>  <filename>`: two spaces, as `sha256sum`
prints. The binary-mode form `<hex> *<filename>` is refused because Terraform
would not find the file name in it (TERRAFORM-CLIENT.md, Providers), and a
publisher-signed document cannot be rewritten without breaking its signature.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from gitreg.errors import BadRequest

MAX_SHASUMS_BYTES = 1024 * 1024
_LINE = re.compile(r"^([0-9a-f]{64})  ([^\s*/\\][^\s/\\]*)$")
_BINARY_MODE = re.compile(r"^[0-9a-fA-F]{64} \*")


def parse_shasums(data: bytes) -> dict[str, str]:
    """Filename -> sha256 hex; raises BadRequest naming the first bad line."""
    if len(data) > MAX_SHASUMS_BYTES:
        raise BadRequest(f"SHA256SUMS is larger than {MAX_SHASUMS_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest("SHA256SUMS is not UTF-8 text") from exc
    if "\r" in text:
        raise BadRequest("SHA256SUMS has CR line endings; Terraform expects '\\n' only")
    entries: dict[str, str] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        match = _LINE.match(line)
        if match is None:
            if _BINARY_MODE.match(line):
                raise BadRequest(
                    f"SHA256SUMS line {number} uses the '*filename' binary form; Terraform"
                    " needs '<sha256>  <filename>' (two spaces, as sha256sum prints)"
                )
            raise BadRequest(
                f"SHA256SUMS line {number} is not '<sha256 in lower-case hex>  <filename>'"
            )
        digest, name = match.groups()
        if name in entries:
            raise BadRequest(f"SHA256SUMS lists {name} twice")
        entries[name] = digest
    if not entries:
        raise BadRequest("SHA256SUMS is empty")
    return entries


def format_shasums(entries: Mapping[str, str]) -> bytes:
    """The document gitreg writes when it signs an upload that came without one:
    sorted by file name, so the same packages always give the same bytes."""
    return "".join(f"{entries[name]}  {name}\n" for name in sorted(entries)).encode()

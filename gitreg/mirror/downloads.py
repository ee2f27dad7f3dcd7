"""What a mirror file request gets (provider-network-mirror-protocol.md), and
VERSION.json as a reader may download it ("List Available Installation Packages").

Archive URLs in VERSION.json are file names relative to the VERSION.json URL,
so they need no base URL. Terraform fetches the zips without credentials
(TERRAFORM-CLIENT.md): a private namespace's zip URLs carry a time-limited
signature for the path they resolve to (checklist U2), and such a body is
made per request, never cached.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gitreg.auth.signed_urls import UrlSigner
from gitreg.canonical_json import json_bytes
from gitreg.mirror.fill import PackageFill


@dataclass(frozen=True)
class JsonFile:
    """`index.json` or a VERSION.json."""

    body: bytes
    revalidate: bool  # answered with an ETag (and 304); never for a body with signed URLs


@dataclass(frozen=True)
class StoredZip:
    """A zip held in the blob store."""

    sha256: str


@dataclass(frozen=True)
class ArrivingZip:
    """A zip on its way from the upstream: a cold miss, sent as it arrives."""

    fill: PackageFill
    private: bool


MirrorFile = JsonFile | StoredZip | ArrivingZip


def sign_archives(signer: UrlSigner, body: bytes, directory: str) -> bytes:
    """VERSION.json with each archive URL signed for the path it resolves to
    under `directory` (the URL path the client sent, without the file name)."""
    document = json.loads(body)
    for archive in document.get("archives", {}).values():
        archive["url"] += "?" + signer.sign(f"{directory}/{archive['url']}")
    return json_bytes(document)

"""VERSION.json as a reader may download it (provider-network-mirror-protocol.md,
"List Available Installation Packages").

Archive URLs in VERSION.json are file names relative to the VERSION.json URL,
so they need no base URL. Terraform fetches the zips without credentials
(TERRAFORM-CLIENT.md): a private namespace's zip URLs carry a time-limited
signature for the path they resolve to (checklist U2), and such a body is
made per request, never cached.
"""

from __future__ import annotations

import json

from gitreg.addresses import ProviderAddress
from gitreg.auth.signed_urls import UrlSigner
from gitreg.canonical_json import json_bytes
from gitreg.mirror.service import MirrorService


async def version_json(
    mirror: MirrorService,
    signer: UrlSigner,
    address: ProviderAddress,
    version: str,
    directory: str,
    private: bool,
) -> bytes:
    """VERSION.json for `version`, served from the URL path `directory` (as the
    client sent it: the signatures cover the paths the zip URLs resolve to)."""
    body = await mirror.version_json(address, version)
    return _sign_archives(signer, body, directory) if private else body


def _sign_archives(signer: UrlSigner, body: bytes, directory: str) -> bytes:
    document = json.loads(body)
    for archive in document.get("archives", {}).values():
        archive["url"] += "?" + signer.sign(f"{directory}/{archive['url']}")
    return json_bytes(document)

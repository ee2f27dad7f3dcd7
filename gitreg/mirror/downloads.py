"""What a mirror file request gets (provider-network-mirror-protocol.md), and
VERSION.json as a reader may download it ("List Available Installation Packages").

Hosted and upstream providers alike follow namespace visibility: with
`read_default = "token"` a locked-down registry serves nothing, mirrored public
providers included, without a read token (unless the operator marks such a
namespace public with `gitreg namespace set NS --public`).

Archive URLs in VERSION.json are file names relative to the VERSION.json URL,
so they need no base URL. Terraform fetches the zips without credentials
(TERRAFORM-CLIENT.md): a private namespace's zip URLs carry a time-limited
signature for the path they resolve to, and such a body is
made per request, never cached.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from gitreg.addresses import ProviderAddress
from gitreg.auth.service import Access, Credentials
from gitreg.auth.signed_urls import UrlSigner
from gitreg.canonical_json import json_bytes
from gitreg.errors import NotFound
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


class MirrorFiles(Protocol):
    """The mirror's answers before access (gitreg.mirror.service.MirrorService)."""

    async def index_json(self, address: ProviderAddress) -> bytes: ...

    async def version_json(self, address: ProviderAddress, version: str) -> bytes: ...

    async def archive_sha256(self, address: ProviderAddress, filename: str) -> str: ...

    async def archive(self, address: ProviderAddress, filename: str) -> str | PackageFill: ...


async def mirror_file(
    mirror: MirrorFiles,
    access: Access,
    signer: UrlSigner,
    who: Credentials,
    address: ProviderAddress,
    name: str,
    directory: str,
    head: bool,
) -> MirrorFile:
    """The mirror file `name` of `address`, asked for at the URL path `directory`.

    A zip URL with a signature needs no token: the signed URL VERSION.json handed
    out is the proof instead. A HEAD for a zip waits for the whole zip, to
    answer its true length. NotFound for a name the protocol does not have."""
    if name.endswith(".zip") and "signature" in who.query:
        access.verify_signature(who)
        private = True
    else:
        private = await access.require_read(who, address.namespace, f"provider {address} not found")
    if name == "index.json":
        return JsonFile(await mirror.index_json(address), revalidate=True)
    if name.endswith(".json"):
        body = await mirror.version_json(address, name[: -len(".json")])
        if private:  # signed URLs expire: never cached, never an old ETag
            return JsonFile(sign_archives(signer, body, directory), revalidate=False)
        return JsonFile(body, revalidate=True)
    if name.endswith(".zip"):
        if head:
            return StoredZip(await mirror.archive_sha256(address, name))
        found = await mirror.archive(address, name)
        return StoredZip(found) if isinstance(found, str) else ArrivingZip(found, private)
    raise NotFound(f"no such mirror file {name[:120]!r}")


def sign_archives(signer: UrlSigner, body: bytes, directory: str) -> bytes:
    """VERSION.json with each archive URL signed for the path it resolves to
    under `directory` (the URL path the client sent, without the file name)."""
    document = json.loads(body)
    for archive in document.get("archives", {}).values():
        archive["url"] += "?" + signer.sign(f"{directory}/{archive['url']}")
    return json_bytes(document)

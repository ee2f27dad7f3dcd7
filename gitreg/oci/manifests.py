"""The manifests, indexes and configs gitreg serves, as bytes.

Media types are the OCI image specification v1.1's; artifact types and the one
`archive/zip` layer are OpenTofu's (website/docs/cli/oci_registries/). Every
document is a function of its inputs only, written compactly with its keys in
the order of the image-spec Go types (what ORAS writes), so the same release
always has the same digest and a client may pin it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from dataclasses import dataclass
from typing import Any

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
IMAGE_CONFIG = "application/vnd.oci.image.config.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"
ZIP_LAYER = "archive/zip"

MODULE_PACKAGE = "application/vnd.opentofu.modulepkg"
PROVIDER = "application/vnd.opentofu.provider"
PROVIDER_TARGET = "application/vnd.opentofu.provider-target"

TITLE = "org.opencontainers.image.title"
VERSION = "org.opencontainers.image.version"
# On a mirrored provider's index: whether it lists every platform of the
# release or only those gitreg holds so far ("complete" / "partial").
PLATFORMS = "land.gitreg.platforms"

EMPTY_BYTES = b"{}"


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Document:
    """A manifest, an index or a config blob: its bytes and what names them."""

    media_type: str
    body: bytes
    artifact_type: str = ""

    @functools.cached_property
    def digest(self) -> str:
        return sha256_digest(self.body)

    @property
    def size(self) -> int:
        return len(self.body)


@dataclass(frozen=True)
class Layer:
    """A blob kept in the blob store: a module zip or a provider zip."""

    sha256: str
    size: int
    title: str  # the file name it unpacks from (`org.opencontainers.image.title`)


def encode(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def _descriptor(
    media_type: str,
    digest: str,
    size: int,
    annotations: dict[str, str] | None = None,
    data: bytes | None = None,
    platform: dict[str, str] | None = None,
    artifact_type: str = "",
) -> dict[str, Any]:
    found: dict[str, Any] = {"mediaType": media_type, "digest": digest, "size": size}
    if annotations:
        found["annotations"] = annotations
    if data is not None:
        found["data"] = base64.b64encode(data).decode()
    if platform is not None:
        found["platform"] = platform
    if artifact_type:
        found["artifactType"] = artifact_type
    return found


def _layer(layer: Layer) -> dict[str, Any]:
    return _descriptor(ZIP_LAYER, "sha256:" + layer.sha256, layer.size, {TITLE: layer.title})


EMPTY_CONFIG = _descriptor(EMPTY, sha256_digest(EMPTY_BYTES), 2, data=EMPTY_BYTES)


def module_manifest(layer: Layer, version: str) -> Document:
    """A module package: the empty config and exactly one `archive/zip` layer
    (website/docs/cli/oci_registries/module-package.mdx)."""
    body = encode(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "artifactType": MODULE_PACKAGE,
            "config": EMPTY_CONFIG,
            "layers": [_layer(layer)],
            "annotations": {VERSION: version},
        }
    )
    return Document(MANIFEST, body, MODULE_PACKAGE)


def platform_config(os: str, arch: str) -> Document:
    """The image config of one provider platform: its platform alone, as
    `oras push --artifact-platform OS/ARCH` writes it."""
    return Document(IMAGE_CONFIG, encode({"architecture": arch, "os": os}))


def provider_manifest(os: str, arch: str, layer: Layer) -> Document:
    """One platform of a provider release: one `archive/zip` layer that is the
    release zip itself, so its digest is the lock file's `zh:` hash
    (website/docs/cli/oci_registries/provider-mirror.mdx)."""
    config = platform_config(os, arch)
    body = encode(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "artifactType": PROVIDER_TARGET,
            "config": _descriptor(config.media_type, config.digest, config.size),
            "layers": [_layer(layer)],
        }
    )
    return Document(MANIFEST, body, PROVIDER_TARGET)


def provider_index(
    platforms: list[tuple[str, str, Document]], version: str, complete: bool
) -> Document:
    """A provider release: one image manifest per platform, each named by Go's
    `os`/`architecture`, in the order given."""
    manifests = [
        _descriptor(
            MANIFEST,
            doc.digest,
            doc.size,
            platform={"architecture": arch, "os": os},
            artifact_type=PROVIDER_TARGET,
        )
        for os, arch, doc in platforms
    ]
    annotations = {VERSION: version, PLATFORMS: "complete" if complete else "partial"}
    body = encode(
        {
            "schemaVersion": 2,
            "mediaType": INDEX,
            "artifactType": PROVIDER,
            "manifests": manifests,
            "annotations": annotations,
        }
    )
    return Document(INDEX, body, PROVIDER)


def referrers_index(referrers: list[Document]) -> Document:
    """The referrers API's answer: an image index of the manifests whose
    `subject` is the asked digest, each descriptor carrying its artifactType
    (distribution-spec v1.1, "Listing Referrers")."""
    manifests = [
        _descriptor(d.media_type, d.digest, d.size, artifact_type=d.artifact_type)
        for d in referrers
    ]
    return Document(INDEX, encode({"schemaVersion": 2, "mediaType": INDEX, "manifests": manifests}))


def tags_document(name: str, tags: list[str]) -> bytes:
    """A `tags/list` answer (distribution-spec v1.1, "Listing Tags")."""
    return encode({"name": name, "tags": tags})

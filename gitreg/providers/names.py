"""Provider versions and goreleaser's file names.

Addresses and platforms are gitreg.addresses', version syntax gitreg.versions'.
A provider version is strict semver without a `v` and without build metadata:
one bad version fails the client's whole `versions` query (TERRAFORM-CLIENT.md,
Providers). File names are goreleaser's defaults for providers:
`terraform-provider-TYPE_VERSION_OS_ARCH.zip`, `..._SHA256SUMS`, `..._SHA256SUMS.sig`
and `..._manifest.json`.
"""

from __future__ import annotations

from enum import Enum

from gitreg.addresses import PLATFORM_PART
from gitreg.errors import BadRequest, NotAVersion
from gitreg.versions import parse_version

MAX_FILENAME = 255


def check_version(text: str) -> str:
    """Strict semver without `v` and without build metadata (which has no
    precedence, so `1.0.0+a` and `1.0.0+b` would be one version twice)."""
    try:
        parsed = parse_version(text)
    except NotAVersion as exc:
        raise BadRequest(
            f"{text[:80]!r} is not a provider version: use semantic versioning without 'v'"
            " (e.g. 1.2.0 or 1.2.0-beta1)"
        ) from exc
    if parsed.build:
        raise BadRequest(f"provider version {text[:80]!r} has build metadata; drop the '+...'")
    return str(parsed)


def package_filename(type_: str, version: str, os_: str, arch: str) -> str:
    return f"terraform-provider-{type_}_{version}_{os_}_{arch}.zip"


def shasums_filename(type_: str, version: str) -> str:
    return f"terraform-provider-{type_}_{version}_SHA256SUMS"


class FileKind(Enum):
    PACKAGE = "package"
    SHASUMS = "shasums"
    SIGNATURE = "signature"
    MANIFEST = "manifest"
    OTHER = "other"


def classify(filename: str, type_: str, version: str) -> tuple[FileKind, tuple[str, str] | None]:
    """What a release file is; for a package, also its (os, arch).

    The project name before `_VERSION_` is free for checksums, signature and
    manifest (goreleaser uses the repository's name), but a package must carry
    this provider's type and version: the client matches the `filename` it is
    given against SHA256SUMS, and the executable inside must match the type.
    """
    if len(filename) > MAX_FILENAME or "/" in filename or "\\" in filename:
        return FileKind.OTHER, None
    if filename.endswith(f"_{version}_SHA256SUMS"):
        return FileKind.SHASUMS, None
    if filename.endswith(f"_{version}_SHA256SUMS.sig"):
        return FileKind.SIGNATURE, None
    if filename.endswith(f"_{version}_manifest.json"):
        return FileKind.MANIFEST, None
    prefix = f"terraform-provider-{type_}_{version}_"
    if filename.lower().startswith(prefix.lower()) and filename.endswith(".zip"):
        rest = filename[len(prefix) : -len(".zip")]
        os_, _, arch = rest.partition("_")
        if filename.startswith(prefix) and PLATFORM_PART.match(os_) and PLATFORM_PART.match(arch):
            return FileKind.PACKAGE, (os_, arch)
    return FileKind.OTHER, None

"""Provider addresses, versions, platforms and goreleaser's file names.

Namespace and type follow Terraform's rules for provider address parts
(letters, digits and dashes, no leading or trailing dash); Terraform lower-cases
them, so lookups use a lower-cased key. Versions are strict semver without a
`v` (syntax: gitreg.versions): one bad version fails the client's whole `versions` query
(TERRAFORM-CLIENT.md, Providers). File names are goreleaser's defaults for
providers: `terraform-provider-TYPE_VERSION_OS_ARCH.zip`, `..._SHA256SUMS`,
`..._SHA256SUMS.sig` and `..._manifest.json`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from gitreg.errors import BadRequest
from gitreg.versions import NotAVersion, parse_version

_PART = re.compile(r"^[0-9A-Za-z](?:[0-9A-Za-z-]{0,62}[0-9A-Za-z])?$")
_PLATFORM_PART = re.compile(r"^[a-z0-9]{1,32}$")
MAX_FILENAME = 255


@dataclass(frozen=True)
class ProviderAddress:
    namespace: str
    type: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.type}".lower()

    def __str__(self) -> str:
        return f"{self.namespace}/{self.type}"


def check_part(kind: str, value: str) -> str:
    if not _PART.match(value):
        raise BadRequest(
            f"invalid provider {kind} {value[:80]!r}: use letters, digits and '-',"
            " starting and ending with a letter or digit, at most 64 characters"
        )
    return value


def check_namespace(value: str) -> str:
    return check_part("namespace", value).lower()


def provider_address(namespace: str, type_: str) -> ProviderAddress:
    """Lower-cased, as Terraform normalises address parts before it asks."""
    return ProviderAddress(
        check_part("namespace", namespace).lower(), check_part("type", type_).lower()
    )


def parse_provider_address(text: str) -> ProviderAddress:
    """`NAMESPACE/TYPE` as typed on the command line."""
    parts = text.strip().split("/")
    if len(parts) != 2:
        raise BadRequest(f"provider address must be NAMESPACE/TYPE, got {text[:120]!r}")
    return provider_address(*parts)


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


def check_platform(os_: str, arch: str) -> tuple[str, str]:
    if not _PLATFORM_PART.match(os_) or not _PLATFORM_PART.match(arch):
        raise BadRequest(f"invalid platform {os_[:40]!r}/{arch[:40]!r}")
    return os_, arch


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
        if filename.startswith(prefix) and _PLATFORM_PART.match(os_) and _PLATFORM_PART.match(arch):
            return FileKind.PACKAGE, (os_, arch)
    return FileKind.OTHER, None

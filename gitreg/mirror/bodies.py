"""The mirror protocol's file names and JSON bodies.

Spec: provider-network-mirror-protocol.md. Bodies are serialised once with
canonical JSON and served as bytes from the metadata cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gitreg.addresses import PLATFORM_RE, ProviderAddress
from gitreg.canonical_json import json_bytes
from gitreg.errors import ConstraintError, NotFound
from gitreg.mirror.hosted import HostedProvider
from gitreg.versions import Version, parse_version


def archive_filename(type_: str, version: str, platform: str) -> str:
    """The zip's name in the mirror: `terraform providers mirror`'s layout."""
    return f"terraform-provider-{type_}_{version}_{platform}.zip"


def parse_archive_filename(type_: str, filename: str) -> tuple[str, str]:
    """(version, platform) from an archive name; raises NotFound when it is not one."""
    prefix = f"terraform-provider-{type_}_"
    if not filename.startswith(prefix) or not filename.endswith(".zip"):
        raise NotFound(f"no such file {filename[:120]!r}")
    parts = filename[len(prefix) : -len(".zip")].rsplit("_", 2)
    platform = f"{parts[1]}_{parts[2]}" if len(parts) == 3 else ""
    if not PLATFORM_RE.match(platform):
        raise NotFound(f"no such file {filename[:120]!r}")
    return parts[0], platform


def check_version(address: ProviderAddress, version: str) -> Version:
    """A version named in a request; NotFound when it is none (so no upstream is asked)."""
    try:
        return parse_version(version)
    except ConstraintError as exc:
        raise NotFound(f"provider {address} has no version {version[:80]!r}") from exc


def sorted_versions(versions: list[str]) -> list[str]:
    return sorted(versions, key=parse_version)


def archives_body(type_: str, version: str, packages: Any) -> bytes:
    # Relative URLs resolve against VERSION.json's own URL (spec: "url"), so the
    # zip sits beside it, as in `terraform providers mirror` output; h1: and zh:
    # are given for every package held, so Terraform verifies and locks what
    # it installs. A package still on its way has no h1: yet ("" here): zh:, its
    # sha256 from the signed SHA256SUMS, is listed alone (docs/mirror.md).
    return json_bytes(
        {
            "archives": {
                p.platform: {
                    "url": archive_filename(type_, version, p.platform),
                    "hashes": [p.h1, f"zh:{p.sha256}"] if p.h1 else [f"zh:{p.sha256}"],
                }
                for p in packages
            }
        }
    )


@dataclass(frozen=True)
class HostedView:
    index_body: bytes
    version_bodies: dict[str, bytes]
    archives: dict[tuple[str, str], str]  # (version, platform) -> sha256


def hosted_view(provider: HostedProvider | None) -> HostedView | None:
    if provider is None:
        return None
    # A yanked version leaves index.json; its version JSON and archives stay.
    listed = sorted_versions([v for v in provider.versions if v not in provider.yanked])
    return HostedView(
        index_body=json_bytes({"versions": {v: {} for v in listed}}),
        version_bodies={
            v: archives_body(provider.type, v, packages)
            for v, packages in provider.versions.items()
        },
        archives={
            (v, p.platform): p.sha256 for v, packages in provider.versions.items() for p in packages
        },
    )

"""Provider addresses, `hostname/namespace/type` (spec: provider-requirements.md,
"Source Addresses"; provider-network-mirror-protocol.md, "Provider Addresses").

Terraform compares addresses case-insensitively and sends them lower-cased, so
gitreg keys everything on the lower-cased form. Namespace and type parts are
letters, digits and single dashes, not starting or ending with a dash (Terraform's
`addrs.ParseProviderPart`). Hostnames are DNS names, optionally with a port.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gitreg.errors import BadRequest

DEFAULT_HOSTNAME = "registry.terraform.io"
# The built-in provider (terraform_remote_state) is never installed.
BUILTIN_HOSTNAME = "terraform.io"

_PART = re.compile(r"^[0-9a-z](?:[0-9a-z-]{0,62}[0-9a-z])?$")
_LABEL = r"[0-9a-z](?:[0-9a-z-]{0,61}[0-9a-z])?"
_HOSTNAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*(?::[0-9]{{1,5}})?$")
PLATFORM_RE = re.compile(r"^[a-z0-9]{1,32}_[a-z0-9]{1,32}$")


@dataclass(frozen=True, order=True)
class ProviderAddress:
    hostname: str
    namespace: str
    type: str

    def __str__(self) -> str:
        return f"{self.hostname}/{self.namespace}/{self.type}"

    @property
    def key(self) -> str:
        return str(self)


def check_hostname(value: str) -> str:
    lowered = value.lower()
    if len(lowered) > 253 or not _HOSTNAME.match(lowered):
        raise BadRequest(f"invalid provider hostname {value[:80]!r}")
    return lowered


def check_part(kind: str, value: str) -> str:
    lowered = value.lower()
    if not _PART.match(lowered) or "--" in lowered:
        raise BadRequest(
            f"invalid provider {kind} {value[:80]!r}: use letters, digits and single dashes,"
            " not starting or ending with a dash"
        )
    return lowered


def provider_address(hostname: str, namespace: str, type_: str) -> ProviderAddress:
    return ProviderAddress(
        check_hostname(hostname), check_part("namespace", namespace), check_part("type", type_)
    )


def parse_provider_source(text: str) -> ProviderAddress:
    """A `source` string: `TYPE`-less forms are refused; `NAMESPACE/TYPE` implies
    registry.terraform.io, as Terraform does."""
    parts = text.strip().split("/")
    if len(parts) == 2:
        return provider_address(DEFAULT_HOSTNAME, *parts)
    if len(parts) == 3:
        return provider_address(*parts)
    raise BadRequest(f"provider source {text[:120]!r} must be [HOSTNAME/]NAMESPACE/TYPE")


def check_platform(value: str) -> str:
    """`os_arch`, e.g. `linux_amd64` (lower-case letters and digits on both sides)."""
    if not PLATFORM_RE.match(value):
        raise BadRequest(f"invalid platform {value[:40]!r}: expected OS_ARCH like linux_amd64")
    return value

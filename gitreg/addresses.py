"""Module and provider addresses, and provider platforms: one vocabulary for
the module registry, the provider registry and the provider mirror.

Module addresses (`namespace/name/system`) follow the public registry's rules:
namespace and name are letters, digits, `-` and `_`, starting and ending with a
letter or digit, at most 64 characters; the system is letters and digits. Paths
keep the user's case (TERRAFORM-CLIENT.md, Modules), so validation is
case-insensitive and lookups use a lower-cased key.

Provider addresses are `hostname/namespace/type` (spec: provider-requirements.md,
"Source Addresses"; provider-network-mirror-protocol.md, "Provider Addresses").
Terraform treats them as case-insensitive and sends them lower-cased, so they
are lower-cased here and everything keys on that form. Namespace and type are
letters, digits and single dashes, not starting or ending with a dash, at most
64 characters (Terraform's `addrs.ParseProviderPart`). Hostnames are DNS names,
optionally with a port.

This module stays at the top level on purpose, beside `gitreg.versions`: it is
the shared vocabulary of `gitreg.modules`, `gitreg.providers` and `gitreg.mirror`,
so none of those packages owns it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gitreg.errors import BadRequest

_NAME = re.compile(r"^[0-9A-Za-z](?:[0-9A-Za-z_-]{0,62}[0-9A-Za-z])?$")
_SYSTEM = re.compile(r"^[0-9A-Za-z]{1,64}$")

# Modules ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModuleAddress:
    namespace: str
    name: str
    system: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}/{self.system}"


def check_name(kind: str, value: str) -> str:
    if not _NAME.match(value):
        raise BadRequest(
            f"invalid {kind} {value[:80]!r}: use letters, digits, '-' and '_',"
            " starting and ending with a letter or digit, at most 64 characters"
        )
    return value


def check_system(value: str) -> str:
    if not _SYSTEM.match(value):
        raise BadRequest(f"invalid system {value[:80]!r}: use letters and digits only")
    return value


def module_address(namespace: str, name: str, system: str) -> ModuleAddress:
    return ModuleAddress(
        check_name("namespace", namespace), check_name("name", name), check_system(system)
    )


def parse_module_address(text: str) -> ModuleAddress:
    """`NAMESPACE/NAME/SYSTEM` as typed on the command line."""
    parts = text.strip().split("/")
    if len(parts) != 3:
        raise BadRequest(f"module address must be NAMESPACE/NAME/SYSTEM, got {text[:120]!r}")
    return module_address(*parts)


def check_subdir(value: str) -> str:
    """A monorepo subdirectory: relative, normalised, no `..` or `.git`."""
    cleaned = value.strip().strip("/")
    if not cleaned:
        return ""
    parts = cleaned.split("/")
    for part in parts:
        if part in ("", ".", "..") or part.lower() == ".git" or "\\" in part or "\x00" in part:
            raise BadRequest(f"invalid subdirectory {value[:120]!r}")
    return "/".join(parts)


# Providers -------------------------------------------------------------------------------

DEFAULT_HOSTNAME = "registry.terraform.io"
# The built-in provider (terraform_remote_state) is never installed.
BUILTIN_HOSTNAME = "terraform.io"

_PROVIDER_PART = re.compile(r"^[0-9a-z](?:[0-9a-z-]{0,62}[0-9a-z])?$")
_LABEL = r"[0-9a-z](?:[0-9a-z-]{0,61}[0-9a-z])?"
_HOSTNAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*(?::[0-9]{{1,5}})?$")


@dataclass(frozen=True, order=True)
class ProviderAddress:
    """A provider address, lower-cased. `hostname` is empty for one of gitreg's own
    providers as the provider registry protocol names it: its paths carry only
    `:namespace/:type`, the hostname being the registry's own
    (provider-registry-protocol.md)."""

    hostname: str
    namespace: str
    type: str

    def __str__(self) -> str:
        return "/".join(part for part in (self.hostname, self.namespace, self.type) if part)

    @property
    def key(self) -> str:
        """The key in dictionaries, caches and the index: `namespace/type` for
        gitreg's own providers, `hostname/namespace/type` for mirrored ones."""
        return str(self)


def check_hostname(value: str) -> str:
    lowered = value.lower()
    if len(lowered) > 253 or not _HOSTNAME.match(lowered):
        raise BadRequest(f"invalid provider hostname {value[:80]!r}")
    return lowered


def check_provider_part(kind: str, value: str) -> str:
    lowered = value.lower()
    if not _PROVIDER_PART.match(lowered) or "--" in lowered:
        raise BadRequest(
            f"invalid provider {kind} {value[:80]!r}: use letters, digits and single dashes,"
            " not starting or ending with a dash, at most 64 characters"
        )
    return lowered


def check_provider_namespace(value: str) -> str:
    return check_provider_part("namespace", value)


def provider_address(hostname: str, namespace: str, type_: str) -> ProviderAddress:
    return ProviderAddress(
        check_hostname(hostname),
        check_provider_part("namespace", namespace),
        check_provider_part("type", type_),
    )


def local_provider_address(namespace: str, type_: str) -> ProviderAddress:
    """One of gitreg's own providers, as the provider registry protocol's paths
    and gitreg's command line name it: `NAMESPACE/TYPE`, no hostname."""
    return ProviderAddress(
        "", check_provider_part("namespace", namespace), check_provider_part("type", type_)
    )


def parse_local_provider_address(text: str) -> ProviderAddress:
    """`NAMESPACE/TYPE` as typed on the command line."""
    parts = text.strip().split("/")
    if len(parts) != 2:
        raise BadRequest(f"provider address must be NAMESPACE/TYPE, got {text[:120]!r}")
    return local_provider_address(*parts)


def parse_provider_source(text: str) -> ProviderAddress:
    """A `source` string: `TYPE`-less forms are refused; `NAMESPACE/TYPE` implies
    registry.terraform.io, as Terraform does."""
    parts = text.strip().split("/")
    if len(parts) == 2:
        return provider_address(DEFAULT_HOSTNAME, *parts)
    if len(parts) == 3:
        return provider_address(*parts)
    raise BadRequest(f"provider source {text[:120]!r} must be [HOSTNAME/]NAMESPACE/TYPE")


# Platforms -------------------------------------------------------------------------------

# Lower-case letters and digits on both sides of `os_arch` (goreleaser's GOOS/GOARCH).
PLATFORM_PART = re.compile(r"^[a-z0-9]{1,32}$")
PLATFORM_RE = re.compile(r"^[a-z0-9]{1,32}_[a-z0-9]{1,32}$")


def check_platform(value: str) -> str:
    """`os_arch`, e.g. `linux_amd64`."""
    if not PLATFORM_RE.match(value):
        raise BadRequest(f"invalid platform {value[:40]!r}: expected OS_ARCH like linux_amd64")
    return value


def check_os_arch(os_: str, arch: str) -> tuple[str, str]:
    """The platform as two path parts, `:os/:arch`."""
    if not PLATFORM_PART.match(os_) or not PLATFORM_PART.match(arch):
        raise BadRequest(f"invalid platform {os_[:40]!r}/{arch[:40]!r}")
    return os_, arch

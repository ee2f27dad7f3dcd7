"""What the `providers.v1` protocol answers for hosted providers
(provider-registry-protocol.md): the version list, where Terraform downloads a
package from ("Find a Provider Package"), and the files those answers name.

The download answer names the zip, SHA256SUMS and its signature by absolute URL: `base`
(the registry's public address, which the HTTP layer knows) + the file's path
under `providers.v1`. Terraform fetches those files without credentials
(TERRAFORM-CLIENT.md), so for a private namespace each URL carries a
time-limited signature and the answer is serialised per request;
a public answer is serialised once per base URL and kept in the metadata cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gitreg.addresses import ProviderAddress, check_os_arch, local_provider_address
from gitreg.auth.service import Access, PrincipalSource
from gitreg.cache import MetadataCache
from gitreg.canonical_json import json_bytes
from gitreg.errors import NotFound
from gitreg.metrics import service as metrics
from gitreg.providers.names import check_version
from gitreg.providers.store import PackageRecord, ProviderIndex
from gitreg.versions import sort_key

# The `providers.v1` base path (discovery announces it); files are served below it.
PREFIX = "/v1/providers"


def files_path(address: ProviderAddress, version: str, filename: str) -> str:
    return f"{PREFIX}/{address.namespace}/{address.type}/{version}/files/{filename}"


def versions_document(store: ProviderIndex, address: ProviderAddress) -> dict[str, Any] | None:
    """The `versions` answer, or None for a provider that is not hosted here.
    Yanked versions are left out; they stay downloadable by exact version
    (docs/providers.md)."""
    provider = store.find_provider(address.key)
    if provider is None:
        return None
    packages = store.packages_by_version(provider.id)
    listed = []
    for version in sorted(store.provider_versions(provider.id), key=lambda v: sort_key(v.version)):
        if version.yanked:
            continue
        listed.append(
            {
                "version": version.version,
                "protocols": list(version.protocols),
                "platforms": [{"os": p.os, "arch": p.arch} for p in packages.get(version.id, [])],
            }
        )
    return {"versions": listed}


def served_files(store: ProviderIndex, address: ProviderAddress, version: str) -> dict[str, str]:
    """filename -> blob sha256 for one version's served files; empty when there
    is no such version."""
    provider = store.find_provider(address.key)
    found = store.provider_version(provider.id, version) if provider else None
    if found is None:
        return {}
    files = {p.filename: p.sha256 for p in store.packages(found.id)}
    files[found.shasums_filename] = found.shasums_sha256
    files[found.shasums_filename + ".sig"] = found.signature_sha256
    return files


@dataclass(frozen=True)
class _Download:
    """Everything of one download answer except the URLs' base and signatures."""

    data: dict[str, Any]
    paths: dict[str, str]  # download_url, shasums_url, shasums_signature_url -> path


def _download(
    store: ProviderIndex, address: ProviderAddress, version: str, os_: str, arch: str
) -> _Download | str:
    """The answer, or why there is none (404 message)."""
    provider = store.find_provider(address.key)
    if provider is None:
        return f"provider {address} not found"
    found = store.provider_version(provider.id, version)
    if found is None:
        return f"provider {address} has no version {version}"
    packages = store.packages(found.id)
    package = next((p for p in packages if (p.os, p.arch) == (os_, arch)), None)
    if package is None:
        return f"provider {address} {version} has no package for {os_}_{arch}"
    key = store.key(found.key_row)
    data = {
        "protocols": list(found.protocols),
        "os": os_,
        "arch": arch,
        "filename": package.filename,
        "shasum": package.sha256,
        "signing_keys": {
            "gpg_public_keys": [
                {
                    "key_id": key.key_id,
                    "ascii_armor": key.ascii_armor,
                    # Left empty: a trust signature is the public registry's
                    # partner programme, which has no meaning here (TERRAFORM-CLIENT.md).
                    "trust_signature": "",
                }
            ]
        },
        "packages": _packages(packages),
    }
    paths = {
        "download_url": files_path(address, version, package.filename),
        "shasums_url": files_path(address, version, found.shasums_filename),
        "shasums_signature_url": files_path(address, version, found.shasums_filename + ".sig"),
    }
    return _Download(data, paths)


def _packages(packages: list[PackageRecord]) -> dict[str, Any]:
    """Every platform's `zh:` and `h1:` hashes and size, whichever platform was
    asked for: OpenTofu 1.12 copies them into the lock file, which is then
    valid on every platform (OpenTofu's provider-registry-protocol, v1.12,
    `packages`). Other clients ignore the field."""
    return {
        f"{p.os}_{p.arch}": {"hashes": [f"zh:{p.sha256}", p.h1], "package_size": p.size}
        for p in sorted(packages, key=lambda p: (p.os, p.arch))
    }


class ProviderDownloads:
    """Resolves `download` for one registry's hosted providers."""

    def __init__(self, store: ProviderIndex, cache: MetadataCache[object], access: Access) -> None:
        self._store = store
        self._cache = cache
        self._access = access

    async def answer(
        self,
        namespace: str,
        type_: str,
        version: str,
        os_: str,
        arch: str,
        base: str,
        who: PrincipalSource,
    ) -> bytes:
        """The JSON answer for the path values as sent: BadRequest for a
        malformed value, 401/NotFound as `Access.check_read` decides, NotFound
        when there is no such provider, version or package."""
        address = local_provider_address(namespace, type_)
        version = check_version(version)
        os_, arch = check_os_arch(os_, arch)
        private = await self._access.check_read(
            address.namespace, f"provider {address} not found", who
        )
        found = await self._cache.get(
            ("provider-download", address.key, version, os_, arch),
            lambda: _download(self._store, address, version, os_, arch),
        )
        if isinstance(found, str):
            raise NotFound(found)
        assert isinstance(found, _Download)
        metrics.downloaded("provider", address.key)
        if private:
            urls = {k: base + self._access.signed(p) for k, p in found.paths.items()}
            return json_bytes({**found.data, **urls})
        body = await self._cache.get(
            ("provider-download-body", address.key, version, os_, arch, base),
            lambda: json_bytes({**found.data, **{k: base + p for k, p in found.paths.items()}}),
        )
        assert isinstance(body, bytes)
        return body

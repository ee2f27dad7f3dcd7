"""Published module versions as the outside sees them: what the `modules.v1`
protocol, the `gitreg module` commands and the operator's conflict list ask of
the feature. Publishing new versions from git tags is `gitreg.modules.publisher`.

A yanked version leaves the version lists but stays downloadable by exact
version; a deprecated one stays listed and installable, its list entry carrying
the reason. Both are ordinary index writes: serving processes notice them as
they notice a publish, and this process's metadata cache is cleared at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from gitreg.addresses import ModuleAddress, module_address
from gitreg.attestations.service import Attestations
from gitreg.audit.service import UNRECORDED, AuditLog
from gitreg.auth.service import Access, Credentials
from gitreg.cache import MISSING, MetadataCache
from gitreg.catalog.documenter import Documenter
from gitreg.errors import BadRequest, NotFound
from gitreg.modules.downloads import ModuleDownloads
from gitreg.storage.protocols import ModuleIndex
from gitreg.storage.records import ConflictRecord, ModuleRecord, VersionRecord
from gitreg.versions import parse_tag_version, sort_key

T = TypeVar("T")

# Who is asking, asked for only when an access decision needs it: a cached
# answer in a public namespace never builds the request's credentials.
Who = Callable[[], Credentials]

# A reason is one short notice shown in terminals and on the module page.
MAX_REASON = 1000
MAX_LINK = 2000


@dataclass(frozen=True)
class VersionChange:
    """What a yank, a deprecation or their undoing did to one module version."""

    module: str  # the module's address as registered
    version: str  # as published
    changed: bool  # False when the version already was in that state
    updated: bool = False  # a deprecation that replaced an earlier reason or link


@dataclass(frozen=True)
class Conflict:
    """A tag that names another commit than the version published from it;
    the published version is kept."""

    module: str | None  # the module's address; None when the module is gone
    record: ConflictRecord


def versions_document(index: ModuleIndex, address: ModuleAddress) -> dict[str, Any] | None:
    """The `versions` answer, or None for a module that is not registered.
    Yanked versions are left out; the one-element `modules` list is the shape
    the spec asks for, for forward compatibility."""
    module = index.find_module(address.namespace, address.name, address.system)
    if module is None:
        return None
    listed = sorted(
        (v for v in index.versions(module.id) if not v.yanked), key=lambda v: sort_key(v.version)
    )
    return {"modules": [{"versions": [_entry(v) for v in listed]}]}


def _entry(version: VersionRecord) -> dict[str, object]:
    """A deprecated version adds `deprecation: {reason, link}`, the per-version
    field of HashiCorp's registry clients (go-slug sourcebundle's
    ModulePackageVersionDeprecation); clients that do not know it ignore it."""
    if not version.deprecated:
        return {"version": version.version}
    notice = {"reason": version.deprecation_reason, "link": version.deprecation_link}
    return {"version": version.version, "deprecation": notice}


def _check_reason(reason: str) -> str:
    reason = reason.strip()
    if not reason:
        raise BadRequest("--reason must say why the version is deprecated")
    if len(reason) > MAX_REASON:
        raise BadRequest(f"--reason is longer than {MAX_REASON} characters")
    if any(ord(c) < 32 and c not in "\n\t" for c in reason):
        raise BadRequest("--reason must not contain control characters")
    return reason


def _check_link(link: str) -> str:
    """An absolute http(s) URL: it becomes an `href` on the module page, so a
    `javascript:` or relative link is refused here, not only escaped there."""
    parts = urlsplit(link)
    if parts.scheme not in ("https", "http") or not parts.netloc or len(link) > MAX_LINK:
        raise BadRequest(f"--link must be an absolute https:// or http:// URL, not {link!r}")
    if any(ord(c) <= 32 for c in link):
        raise BadRequest("--link must not contain spaces or control characters")
    return link


class Modules:
    """The published module versions of one registry."""

    def __init__(
        self,
        *,
        index: ModuleIndex,
        cache: MetadataCache[object],
        access: Access,
        docs: Documenter,
        audit: AuditLog = UNRECORDED,
        attest: Attestations | None = None,
    ) -> None:
        self._audit = audit
        self._attest = attest  # each change is logged in its own transaction
        self._index = index
        self._cache = cache
        self._access = access
        self._docs = docs
        self._downloads = ModuleDownloads(index, cache, access)

    # -- the modules.v1 protocol ----------------------------------------------------

    async def versions(
        self,
        who: Who,
        namespace: str,
        name: str,
        system: str,
        encode: Callable[[dict[str, Any]], T],
    ) -> T:
        """The `versions` answer for the path values as sent, as `encode` makes
        it from the document; made once per change and kept in the metadata
        cache under the names case-folded (a hit skips validation: an entry
        exists only for names that were valid when it was built). BadRequest
        for a malformed address, 401/NotFound as the namespace's privacy
        decides, NotFound for a module that is not registered."""
        key = ("module-versions", namespace.lower(), name.lower(), system.lower())
        not_found = f"module {namespace}/{name}/{system} not found"
        body = self._cache.peek(key)
        if body is MISSING:
            address = module_address(namespace, name, system)
            await self._access.require_read(who(), address.namespace, not_found)

            def build() -> T | None:
                document = versions_document(self._index, address)
                return None if document is None else encode(document)

            body = await self._cache.get(key, build)
        elif not self._access.known_public(namespace):
            await self._access.require_read(who(), namespace, not_found)
        if body is None:
            raise NotFound(not_found)
        return cast(T, body)

    def cached_location(
        self, namespace: str, name: str, system: str, version: str, base: str
    ) -> str | None:
        """Where a version downloads from, when the metadata cache holds the
        answer and the namespace is known public: no await on the hot path.
        NotFound for a cached miss; None when `location` must decide."""
        return self._downloads.cached_location(namespace, name, system, version, base)

    async def location(
        self, who: Who, namespace: str, name: str, system: str, version: str, base: str
    ) -> str:
        """Where a version downloads from: an absolute archive URL under `base`,
        `//subdir` for a module in a directory, signed for a private namespace.
        BadRequest for a malformed address or version, 401/NotFound as the
        namespace's privacy decides, NotFound for an unknown module or version."""
        return await self._downloads.location(
            namespace, name, system, version, base, lambda: self._access.principal(who())
        )

    # -- curating published versions ------------------------------------------------

    def set_yanked(self, address: ModuleAddress, version: str, yanked: bool) -> VersionChange:
        """Hide a version from the version lists, or list it again; its archive
        stays served by exact version. The module's search entry follows, since
        its latest listed version may have changed. NotFound for an unknown
        module or version, BadRequest for a malformed version."""
        module, key, found = self._version(address, version)
        changed = found.yanked != yanked
        if changed:
            action = "module.yank" if yanked else "module.unyank"
            event = "yank" if yanked else "unyank"
            with (
                self._audit.recording(action, f"{module.address} {found.version}"),
                self._logged(module, key, event),
            ):
                self._index.set_yanked(module.id, key, yanked)
            self._docs.refresh_search(module)
            self._cache.invalidate()
        return VersionChange(module.address, found.version, changed)

    def deprecate(
        self, address: ModuleAddress, version: str, reason: str, link: str = ""
    ) -> VersionChange:
        """Deprecate a version with a reason and an optional absolute http(s)
        link, or replace its notice; it stays listed and installable.
        BadRequest for an empty, overlong or control-character reason or a bad
        link; NotFound for an unknown module or version."""
        reason = _check_reason(reason)
        link = _check_link(link) if link else ""
        module, key, found = self._version(address, version)
        if (found.deprecation_reason, found.deprecation_link) == (reason, link):
            return VersionChange(module.address, found.version, changed=False)
        logged = self._logged(module, key, "deprecate")
        with (
            self._audit.recording(
                "module.deprecate", f"{module.address} {found.version}", detail=reason
            ),
            logged,
        ):
            self._index.set_deprecation(module.id, key, reason, link)
        self._cache.invalidate()
        return VersionChange(module.address, found.version, True, updated=found.deprecated)

    def undeprecate(self, address: ModuleAddress, version: str) -> VersionChange:
        """Lift a version's deprecation; NotFound for an unknown module or version."""
        module, key, found = self._version(address, version)
        if not found.deprecated:
            return VersionChange(module.address, found.version, changed=False)
        with (
            self._audit.recording("module.undeprecate", f"{module.address} {found.version}"),
            self._logged(module, key, "undeprecate"),
        ):
            self._index.set_deprecation(module.id, key, None)
        self._cache.invalidate()
        return VersionChange(module.address, found.version, changed=True)

    def _logged(
        self, module: ModuleRecord, key: str, event: str
    ) -> contextlib.AbstractContextManager[object]:
        """The event's log entry, attached to the transaction the block opens."""
        return (
            self._attest.for_change(module, key, event)
            if self._attest
            else contextlib.nullcontext()
        )

    def conflicts(self) -> list[Conflict]:
        """Every recorded tag that disagrees with its published version."""
        modules = {m.id: m.address for m in self._index.modules()}
        return [Conflict(modules.get(c.module_id), c) for c in self._index.conflicts()]

    def _version(
        self, address: ModuleAddress, version: str
    ) -> tuple[ModuleRecord, str, VersionRecord]:
        """A registered module's published version, with its version key (no
        build metadata)."""
        key = str(parse_tag_version(version).without_build())  # NotAVersion is a BadRequest
        module = self._index.find_module(address.namespace, address.name, address.system)
        if module is None:
            raise NotFound(f"module {address} is not registered")
        found = self._index.version_by_key(module.id, key)
        if found is None:
            raise NotFound(f"module {module.address} has no version {version}")
        return module, key, found

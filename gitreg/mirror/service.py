"""The pull-through cache behind the mirror protocol and `gitreg mirror sync`.

Version lists (`index.json`): an upstream's list is reused for
`mirror_index_ttl` seconds, then asked again. When asking fails (down, 5xx,
timeout, a bad answer) the last good list is served for up to
`mirror_stale_if_error` seconds after it was fetched, and the
upstream is not asked again for `RETRY_AFTER` seconds.

Packages (`VERSION.json` and the zips): on a miss the packages of the version
for the platforms in `mirror_platforms` are fetched and verified together
(gitreg.mirror.verify), each at most once at a time however many requests
wait for it (single-flight). A package that fails is remembered for
`RETRY_AFTER` seconds so a broken upstream is not hammered, and is never
stored. Stored packages are never replaced. The download and its
checks are gitreg/mirror/fetch.py's; a cold miss of a zip is sent to its requests
while it arrives, its tail held back until its sha256 is the signed one
(gitreg/mirror/fill.py), and a cold VERSION.json lists `zh:` from the verified
SHA256SUMS for packages on their way (`_cold_version`).

Warm hits read pre-serialised bytes from the metadata cache: no JSON encoding,
no database access, no write. Every write here invalidates this process's
cache; other processes notice through the index's `data_version`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread

from gitreg.addresses import ProviderAddress
from gitreg.auth.service import Access, Credentials
from gitreg.auth.signed_urls import UrlSigner
from gitreg.cache import MetadataCache
from gitreg.canonical_json import json_bytes
from gitreg.errors import GitregError, NotFound, UpstreamError, UpstreamNotFound
from gitreg.metrics import service as metrics
from gitreg.mirror.bodies import (
    HostedView,
    archive_filename,
    archives_body,
    check_version,
    hosted_view,
    parse_archive_filename,
    sorted_versions,
)
from gitreg.mirror.downloads import MirrorFile, mirror_file
from gitreg.mirror.export import ExportResult, export_static
from gitreg.mirror.fetch import PackageFetcher
from gitreg.mirror.fill import PackageFill
from gitreg.mirror.hosted import HostedPackage, HostedProviders
from gitreg.mirror.options import MirrorOptions, mirror_options
from gitreg.mirror.singleflight import SingleFlight
from gitreg.mirror.store import CachedIndex, CachedVersion, MirrorIndex, MirrorPackage
from gitreg.mirror.sync import Selection, SyncReport, sync_configurations
from gitreg.mirror.upstream import Progress, UpstreamClient
from gitreg.providers.package import PackageLimits
from gitreg.providers.store import ProviderIndex
from gitreg.settings import Settings
from gitreg.storage.blobs import BlobStore

log = logging.getLogger("gitreg.mirror")

RETRY_AFTER = 30.0
MAX_FAILURES = 10_000  # remembered failures; bounded like the metadata cache


@dataclass(frozen=True)
class VersionView:
    """What VERSION.json says now, and whether a fill could add to it."""

    body: bytes
    packages: tuple[MirrorPackage, ...]
    missing: tuple[str, ...]  # wanted platforms the upstream offers and we lack


class MirrorService:
    def __init__(
        self,
        options: MirrorOptions,
        store: MirrorIndex,
        blobs: BlobStore,
        cache: MetadataCache[object],
        upstream: UpstreamClient,
        access: Access,
        signer: UrlSigner,
        hosted: HostedProviders | None = None,
    ) -> None:
        self._options = options
        self._store = store
        self.blobs = blobs
        self.cache = cache
        self._upstream = upstream
        self._access = access
        self._signer = signer
        self._hosted = hosted
        self.flight = SingleFlight()  # version lists
        self._fills: dict[tuple[str, str, str], PackageFill] = {}  # packages in flight
        self._fresh: dict[str, float] = {}  # provider key -> monotonic time it was good
        # (provider, version, platform) -> (monotonic time to retry after, the error)
        self._failed: dict[tuple[str, str, str], tuple[float, GitregError]] = {}
        limits = PackageLimits(
            options.max_package_bytes, options.max_unpacked_bytes, options.max_files
        )
        self.fetcher = PackageFetcher(upstream, blobs, limits, options.max_package_bytes)

    async def aclose(self) -> None:
        """Close the connections to the upstreams (they belong to one event loop)."""
        await self._upstream.aclose()

    async def file(
        self, who: Credentials, address: ProviderAddress, name: str, directory: str, head: bool
    ) -> MirrorFile:
        """The file `name` of `address` asked for at URL path `directory` (downloads.py)."""
        return await mirror_file(
            self, self._access, self._signer, who, address, name, directory, head
        )

    # -- the cache's contents -----------------------------------------------------------

    def cached_packages(
        self, address: ProviderAddress | None = None, version: str | None = None
    ) -> list[MirrorPackage]:
        """The packages pulled through and kept: every one, or those of one
        provider (and version). Blocking."""
        keys = [address.key] if address else self._store.cached_provider_keys()
        return [p for key in keys for p in self._store.packages(key, version)]

    def export(self, dest: Path, platforms: tuple[str, ...]) -> ExportResult:
        """Write the cache, and gitreg's own providers under its own hostnames, as
        a static mirror in `dest` (gitreg/mirror/export.py); every platform when
        `platforms` is empty. Blocking."""
        hosted = self._hosted.all() if self._hosted is not None else []
        hostnames = sorted(self._options.local_hostnames)
        return export_static(self._store, self.blobs, hosted, hostnames, dest, platforms)

    async def sync(
        self, path: Path, platforms: tuple[str, ...], report: SyncReport
    ) -> list[Selection]:
        """Pre-fill the cache for the Terraform configurations under `path`, as
        `terraform init` would choose (gitreg/mirror/sync.py), for `platforms`, else
        for the configured `mirror_platforms` each version offers."""
        return await sync_configurations(self, path, platforms, self._options.platforms, report)

    # -- which source ------------------------------------------------------------------

    def is_local(self, address: ProviderAddress) -> bool:
        return address.hostname in self._options.local_hostnames

    def check_allowed(self, address: ProviderAddress) -> None:
        if not self._options.allowed(address):
            raise NotFound(
                f"{address} is not mirrored here: its hostname/namespace is not in"
                " mirror_allow, and no upstream is mapped for its hostname"
            )

    async def hosted_view(self, address: ProviderAddress) -> HostedView:
        """gitreg's own provider, with its JSON answers serialised once."""
        hosted = self._hosted
        found = None
        if hosted is not None:
            found = await self.cache.get(
                ("mirror-hosted", address.key),
                lambda: hosted_view(hosted.provider(address.namespace, address.type)),
            )
        if not isinstance(found, HostedView):
            raise NotFound(f"provider {address} not found")
        return found

    # -- index.json ---------------------------------------------------------------------

    async def index_json(self, address: ProviderAddress) -> bytes:
        if self.is_local(address):
            return (await self.hosted_view(address)).index_body
        self.check_allowed(address)
        await self.current_index(address)
        body = await self.cache.get(
            ("mirror-index", address.key), lambda: self._index_body(address)
        )
        if not isinstance(body, bytes):
            raise NotFound(f"provider {address} not found")
        return body

    def _index_body(self, address: ProviderAddress) -> bytes | None:
        index = self._store.index(address.key)
        if index is None:
            return None
        names = [v.version for v in index.versions]
        return json_bytes({"versions": {v: {} for v in sorted_versions(names)}})

    async def current_index(self, address: ProviderAddress, force: bool = False) -> CachedIndex:
        """The upstream's version list: fresh, re-fetched, or stale within the window."""
        good_at = self._fresh.get(address.key)
        fresh = good_at is not None and time.monotonic() - good_at < self._options.index_ttl
        if fresh and not force:
            cached = await self.cache.get(
                ("mirror-index-record", address.key), lambda: self._store.index(address.key)
            )
            if isinstance(cached, CachedIndex):
                metrics.mirror_hit("index")
                return cached
        metrics.mirror_miss("index")
        try:
            return await self.flight.run(("index", address.key), lambda: self._refresh(address))
        except UpstreamNotFound as exc:
            raise NotFound(f"provider {address} not found upstream: {exc}") from exc
        except UpstreamError as exc:
            stored = await anyio.to_thread.run_sync(self._store.index, address.key)
            if stored is None or time.time() - stored.fetched_at > self._options.stale_if_error:
                raise
            age = time.time() - stored.fetched_at
            # Stale-if-error: serve the last good list and back off a little.
            metrics.mirror_stale_served()
            log.warning(
                "%s: upstream failed (%s); serving the list from %.0fs ago", address, exc, age
            )
            self._fresh[address.key] = (
                time.monotonic()
                - self._options.index_ttl
                + min(RETRY_AFTER, self._options.index_ttl)
            )
            return stored

    async def _refresh(self, address: ProviderAddress) -> CachedIndex:
        listed = await self._upstream.versions(address)
        versions = [CachedVersion(v.version, v.protocols, v.platforms) for v in listed]
        now = time.time()
        changed = await anyio.to_thread.run_sync(
            lambda: self._store.save_index(
                address.key, address.hostname, address.namespace, address.type, versions, now
            )
        )
        if changed:
            self.cache.invalidate()
        self._fresh[address.key] = time.monotonic()
        return CachedIndex(
            address.key, address.hostname, address.namespace, address.type, tuple(versions), now
        )

    # -- VERSION.json -------------------------------------------------------------------

    async def version_json(self, address: ProviderAddress, version: str) -> bytes:
        check_version(address, version)
        if self.is_local(address):
            bodies = (await self.hosted_view(address)).version_bodies
            if version not in bodies:
                raise NotFound(f"provider {address} has no version {version}")
            return bodies[version]
        self.check_allowed(address)
        view = await self._view(address, version)
        if view.missing or not view.packages:
            return await self._cold_version(address, version, view)
        return view.body

    async def _view(self, address: ProviderAddress, version: str) -> VersionView:
        found = await self.cache.get(
            ("mirror-version", address.key, version), lambda: self._build_view(address, version)
        )
        assert isinstance(found, VersionView)
        return found

    def _build_view(self, address: ProviderAddress, version: str) -> VersionView:
        packages = tuple(self._store.packages(address.key, version))
        have = {p.platform for p in packages}
        index = self._store.index(address.key)
        offered = next(
            (v.platforms for v in (index.versions if index else ()) if v.version == version), ()
        )
        wanted = [p for p in self._options.platforms if not offered or p in offered]
        body = archives_body(
            address.type, version, [HostedPackage.from_mirror(p) for p in packages]
        )
        return VersionView(body, packages, tuple(p for p in wanted if p not in have))

    async def _cold_version(
        self, address: ProviderAddress, version: str, view: VersionView
    ) -> bytes:
        """A miss: start the fills of the version's missing packages for
        `mirror_platforms` (those the upstream offers), and answer once their
        SHA256SUMS verified, without waiting for the zips: `zh:` (the zip's sha256
        from the signed SHA256SUMS) for those, `h1:` and `zh:` for the packages
        held. Terraform verifies a package against any listed hash it supports
        (spec: "hashes"; TERRAFORM-CLIENT.md), and a fill sends no zip whose
        sha256 is not that one (gitreg/mirror/fill.py)."""
        index = await self.current_index(address)
        listed = next((v for v in index.versions if v.version == version), None)
        if listed is None:
            raise NotFound(f"provider {address} has no version {version}")
        held = {p.platform: p for p in view.packages}
        targets = [
            p
            for p in self._options.platforms
            if p not in held and (not listed.platforms or p in listed.platforms)
        ]
        results = await asyncio.gather(
            *(self._expected(address, version, p) for p in targets), return_exceptions=True
        )
        errors: list[GitregError] = []
        entries = [HostedPackage.from_mirror(p) for p in held.values()]
        for platform, result in zip(targets, results, strict=True):
            if isinstance(result, GitregError):
                if not isinstance(result, NotFound):  # NotFound: a platform the upstream lacks
                    errors.append(result)
                log.warning("%s %s %s: %s", address, version, platform, result)
            elif isinstance(result, BaseException):
                raise result
            elif isinstance(result, MirrorPackage):
                entries.append(HostedPackage.from_mirror(result))
            else:  # on its way: the signed sha256 only, as `zh:` (h1 "" lists none)
                filename = archive_filename(address.type, version, platform)
                entries.append(HostedPackage(platform, filename, result, 0, ""))
        if not entries:
            if errors:
                raise errors[0]
            raise NotFound(f"provider {address} {version} has no package for any platform")
        return archives_body(address.type, version, sorted(entries, key=lambda p: p.platform))

    async def _expected(
        self, address: ProviderAddress, version: str, platform: str
    ) -> MirrorPackage | str:
        """The stored package, or the signed sha256 of the one its fill brings, once
        that zip is arriving (an upstream that refuses it, or a size over the cap,
        is an error here as before, not a listed zip that then fails)."""
        begun = await self._begin(address, version, platform, None)
        if isinstance(begun, MirrorPackage):
            return begun
        await begun.ready()
        return begun.expected

    # -- archives -----------------------------------------------------------------------

    async def archive_sha256(self, address: ProviderAddress, filename: str) -> str:
        found = await self.archive(address, filename)
        return found if isinstance(found, str) else (await found.result()).sha256

    async def archive(self, address: ProviderAddress, filename: str) -> str | PackageFill:
        """The zip's sha256 when it is here; on a cold miss, its fill in progress,
        which the caller may stream from as it arrives (gitreg/mirror/fill.py)."""
        version, platform = parse_archive_filename(address.type, filename)
        check_version(address, version)
        if self.is_local(address):
            sha256 = (await self.hosted_view(address)).archives.get((version, platform))
            if sha256 is None:
                raise NotFound(f"no such file {filename[:120]!r}")
            return sha256
        self.check_allowed(address)
        found = await self.cache.get(
            ("mirror-archive", address.key, version, platform),
            lambda: self._store.package(address.key, version, platform),
        )
        if isinstance(found, MirrorPackage):
            metrics.mirror_hit("package")
            return found.sha256
        # Pull-through for a platform VERSION.json did not list, but only for a
        # version and platform the upstream lists: made-up names cost no request.
        index = await self.current_index(address)
        listed = next((v for v in index.versions if v.version == version), None)
        if listed is None or (listed.platforms and platform not in listed.platforms):
            raise NotFound(f"no such file {filename[:120]!r}")
        begun = await self._begin(address, version, platform, None)
        return begun.sha256 if isinstance(begun, MirrorPackage) else begun

    async def settled(self) -> None:
        """Every fill of this event loop has ended (stored or failed): a cold
        VERSION.json, and a cold zip once its bytes went out, leave fills running
        on their own; this waits for them (an embedding caller that is about to
        close its loop, such as the tests' in-process client)."""
        while fills := [f.task for f in self._fills.values() if f.running() and f.task]:
            await asyncio.wait(fills)

    # -- one package --------------------------------------------------------------------

    async def ensure_package(
        self,
        address: ProviderAddress,
        version: str,
        platform: str,
        progress: Progress | None = None,
    ) -> MirrorPackage:
        begun = await self._begin(address, version, platform, progress)
        return begun if isinstance(begun, MirrorPackage) else await begun.result()

    async def _begin(
        self, address: ProviderAddress, version: str, platform: str, progress: Progress | None
    ) -> MirrorPackage | PackageFill:
        """The stored package, or the one fill of it in flight (started if none is:
        single-flight). The fill runs on its own: a caller that goes away does
        not cancel it for the others."""
        stored = await anyio.to_thread.run_sync(self._store.package, address.key, version, platform)
        if stored is not None:
            metrics.mirror_hit("package")
            return stored
        key = (address.key, version, platform)
        fill = self._fills.get(key)
        if fill is not None and fill.running():  # joins the miss already counted
            return fill
        failed = self._failed.get(key)
        if failed and time.monotonic() < failed[0]:
            raise failed[1]
        if len(self._failed) > MAX_FAILURES:
            self._failed.clear()
        # A miss is a lookup that asks the upstream (docs/operations.md): one per
        # fill, however many requests join it, and none for a failure remembered.
        metrics.mirror_miss("package")
        fill = self._fills[key] = PackageFill(progress)
        fill.start(self._fill_mapped(key, address, fill)).add_done_callback(
            lambda _: self._fills.pop(key) if self._fills.get(key) is fill else None
        )
        return fill

    async def _fill_mapped(
        self, key: tuple[str, str, str], address: ProviderAddress, fill: PackageFill
    ) -> MirrorPackage:
        """`_fill_package`, with its failure remembered for a while."""
        try:
            return await self._fill_package(address, key[1], key[2], fill)
        except UpstreamNotFound as exc:
            # A platform the upstream does not have stays absent for a while.
            error: GitregError = NotFound(str(exc))
            hold = max(RETRY_AFTER, self._options.index_ttl)
            self._failed[key] = (time.monotonic() + hold, error)
            raise error from exc
        except GitregError as exc:
            self._failed[key] = (time.monotonic() + RETRY_AFTER, exc)
            if fill.verified:  # no reader was cut off to say it: the bytes were the signed ones
                log.warning("%s %s %s: sent, but not kept: %s", address, key[1], key[2], exc)
            elif fill.unreported():
                # Begun by a cold VERSION.json, whose answer already went out, and
                # read by no client: a tampered or cut zip would otherwise be only
                # remembered, never logged.
                log.warning(
                    "%s %s %s: failed while it arrived, not kept: %s", address, key[1], key[2], exc
                )
            raise

    async def _fill_package(
        self, address: ProviderAddress, version: str, platform: str, fill: PackageFill
    ) -> MirrorPackage:
        what = f"{address} {version} {platform}"
        info = await self._upstream.download(address, version, platform)
        key_id, package = await self.fetcher.fetch(address, info, what, fill)
        record = MirrorPackage(
            provider_key=address.key,
            version=version,
            platform=platform,
            filename=archive_filename(address.type, version, platform),
            sha256=package.sha256,
            size=package.size,
            h1=package.h1,
            protocols=info.protocols,
            key_id=key_id,
            source_url=info.download_url,
            fetched_at=time.time(),
        )
        stored = await anyio.to_thread.run_sync(self._keep, record)
        self.cache.invalidate()
        log.info("mirrored %s (%d bytes, signed by %s)", what, stored.size, stored.key_id)
        return stored

    def _keep(self, record: MirrorPackage) -> MirrorPackage:
        """The blob is durable already; then the row: a crash leaves at most an
        orphan blob."""
        stored = self._store.add_package(record)
        if stored.sha256 != record.sha256:
            log.warning(
                "%s %s %s: upstream now serves other bytes (%s); keeping the cached %s",
                record.provider_key,
                record.version,
                record.platform,
                record.sha256,
                stored.sha256,
            )
        return stored


def build_mirror(
    settings: Settings,
    store: MirrorIndex,
    blobs: BlobStore,
    cache: MetadataCache[object],
    access: Access,
    signer: UrlSigner,
    providers: ProviderIndex | None = None,
) -> MirrorService:
    options = mirror_options(settings)
    return MirrorService(
        options,
        store,
        blobs,
        cache,
        UpstreamClient(options),
        access,
        signer,
        HostedProviders(providers) if providers is not None else None,
    )

"""The pull-through module cache (docs/module-proxy.md).

A proxied namespace answers the module protocol (module-registry-protocol.md)
from an upstream registry:

* versions: the upstream's list, reused for `mirror_index_ttl` seconds and,
  when the upstream fails, served stale for up to `mirror_stale_if_error`
  seconds after the last good answer, exactly like the provider mirror.
  Versions already cached are always listed, so they install with the
  upstream gone.
* download: on the first request for a version, its upstream location is
  followed, the ref fetched at depth 1 and archived by gitreg's own builder
  (fetch.py); the record (location, resolved commit, archive sha256) is
  immutable from then on. Concurrent first requests share one fetch
  (single-flight).
* moves: `check_moves` asks each cached version's repository where its ref
  points now; a different commit is recorded and reported, never served
  (gitreg keeps the first bytes, as for own moved tags).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio.to_thread

from gitreg.addresses import ModuleAddress
from gitreg.archives.entries import left_out_line
from gitreg.cache import MetadataCache
from gitreg.canonical_json import json_bytes
from gitreg.errors import GitregError, NotAVersion, NotFound, UpstreamError, UpstreamNotFound
from gitreg.mirror.singleflight import SingleFlight
from gitreg.module_proxy.archive_source import archive_from_download
from gitreg.module_proxy.config import ProxyUpstream
from gitreg.module_proxy.export import ModuleTransfer, export_modules, import_modules
from gitreg.module_proxy.fetch import FetchedArchive, FetchLimits, fetch_archive, remote_commit
from gitreg.module_proxy.options import ProxyOptions
from gitreg.module_proxy.prefetch import PrefetchResult, Report, prefetch
from gitreg.module_proxy.source import ArchiveSource, GitSource, parse_source
from gitreg.module_proxy.store import ModuleProxyIndex, ProxiedMove, ProxiedVersion
from gitreg.module_proxy.upstream import ModuleUpstream
from gitreg.modules.downloads import archive_path
from gitreg.storage.blobs import BlobStore
from gitreg.versions import parse_tag_version, sort_key

if TYPE_CHECKING:
    from gitreg.auth.service import Access, PrincipalSource

log = logging.getLogger("gitreg.module_proxy")

RETRY_AFTER = 30.0  # seconds a failing upstream is left alone while stale lists serve
MAX_REMEMBERED = 10_000  # version-list answers kept in memory, like the metadata cache's bound


class ModuleProxyService:
    def __init__(
        self,
        options: ProxyOptions,
        store: ModuleProxyIndex,
        blobs: BlobStore,
        cache: MetadataCache[object],
        workdir: Path,
        upstream: ModuleUpstream | None = None,
    ) -> None:
        self.options = options
        self._store = store
        self.blobs = blobs
        self.cache = cache
        self.workdir = workdir
        self.upstream = upstream or ModuleUpstream(options)
        self.flight = SingleFlight()
        self._fresh: dict[str, float] = {}
        # The last version-list answer per module with the cache generation it
        # was built in: while the upstream list is fresh and nothing was
        # committed since, a versions request touches neither the database nor
        # the upstream (the cached read path).
        self._bodies: dict[str, tuple[int, bytes]] = {}

    def handles(self, namespace: str) -> bool:
        # Asked on every module answer: without [[module_proxy]] (the default)
        # there is nothing to look up.
        return bool(self.options.upstreams) and self.options.upstream_for(namespace) is not None

    def _upstream(self, address: ModuleAddress) -> tuple[ProxyUpstream, str, str]:
        found = self.options.upstream_for(address.namespace)
        if found is None:
            raise NotFound(f"module {address} is not in a proxied namespace")
        module = f"{address.namespace}/{address.name}/{address.system}"
        return found, module, f"{found.host}/{module}".lower()

    # -- versions -------------------------------------------------------------------------

    async def versions(self, address: ModuleAddress) -> list[str]:
        """Upstream versions (fresh or stale-if-error) plus every cached one, sorted."""
        upstream, module, key = self._upstream(address)
        listed = await self._current(upstream, module, key)
        cached = await anyio.to_thread.run_sync(self._store.versions, key)
        known = set(listed) | {v.version for v in cached}
        if not known:
            raise NotFound(f"module {address} has no versions upstream or cached")
        return sorted(known, key=sort_key)

    async def versions_body(self, address: ModuleAddress) -> bytes:
        _, _, key = self._upstream(address)
        fresh_at, memo = self._fresh.get(key), self._bodies.get(key)
        generation = self.cache.generation
        fresh = fresh_at is not None and time.monotonic() - fresh_at < self.options.index_ttl
        if fresh and memo is not None and memo[0] == generation:
            return memo[1]
        listed = await self.versions(address)
        body = json_bytes({"modules": [{"versions": [{"version": v} for v in listed]}]})
        if len(self._bodies) >= MAX_REMEMBERED:
            self._bodies.clear()
        self._bodies[key] = (generation, body)
        return body

    async def _current(self, upstream: ProxyUpstream, module: str, key: str) -> list[str]:
        good_at = self._fresh.get(key)
        stored = await anyio.to_thread.run_sync(self._store.index, key)
        if stored and good_at is not None and time.monotonic() - good_at < self.options.index_ttl:
            return list(stored.versions)
        try:
            return await self.flight.run(
                ("index", key), lambda: self._refresh(upstream, module, key)
            )
        except UpstreamNotFound:
            return []  # cached versions still serve; none at all is a 404 above
        except UpstreamError as exc:
            if stored is None or time.time() - stored.fetched_at > self.options.stale_if_error:
                if await anyio.to_thread.run_sync(self._store.versions, key):
                    log.warning("%s: upstream failed (%s); serving cached versions only", key, exc)
                    return []
                raise
            # Stale-if-error: the last good list, and a short back-off.
            log.warning("%s: upstream failed (%s); serving an older list", key, exc)
            hold = min(RETRY_AFTER, self.options.index_ttl)
            self._fresh[key] = time.monotonic() - self.options.index_ttl + hold
            return list(stored.versions)

    async def _refresh(self, upstream: ProxyUpstream, module: str, key: str) -> list[str]:
        listed = await self.upstream.versions(upstream.host, module)
        now = time.time()
        await anyio.to_thread.run_sync(lambda: self._store.save_index(key, listed, now))
        self._fresh[key] = time.monotonic()
        return listed

    # -- downloads ------------------------------------------------------------------------

    async def cached(self, address: ModuleAddress, version: str) -> ProxiedVersion:
        """The cached version, fetched and archived first if it is not cached yet."""
        upstream, module, key = self._upstream(address)
        try:
            wanted = str(parse_tag_version(version).without_build())
        except NotAVersion as exc:
            raise NotFound(f"module {address} has no version {version[:64]}") from exc
        found = await anyio.to_thread.run_sync(self._store.version, key, wanted)
        if found is not None:
            return found
        return await self.flight.run(
            ("version", key, wanted),
            lambda: self._fill(upstream, address, module, key, wanted),
        )

    async def _fill(
        self, upstream: ProxyUpstream, address: ModuleAddress, module: str, key: str, version: str
    ) -> ProxiedVersion:
        try:
            location = await self.upstream.location(upstream.host, module, version)
        except UpstreamNotFound as exc:
            raise NotFound(f"module {address} has no version {version} upstream") from exc
        source = parse_source(location)
        fetched = await self._fetch(source)
        if fetched.skipped:
            log.warning(
                "%s %s: archive leaves out %s", key, version, left_out_line(fetched.skipped)
            )
        record = ProxiedVersion(
            module_key=key,
            version=version,
            host=upstream.host,
            namespace=address.namespace,
            name=address.name,
            system=address.system,
            location=location,
            git_url=source.url,
            ref=source.ref if isinstance(source, GitSource) else "",
            subdir=source.subdir,
            commit_sha=fetched.commit_sha,
            archive_sha256=fetched.sha256,
            archive_size=fetched.size,
            fetched_at=time.time(),
        )
        stored = await anyio.to_thread.run_sync(self._store.add_version, record)
        self.cache.invalidate()  # the access snapshot learns the new blob's owner
        if stored.archive_sha256 != fetched.sha256:
            await anyio.to_thread.run_sync(self._drop_lost_archive, stored, fetched.sha256)
            return stored
        log.info("cached %s %s from %s at %s", key, version, source.url, fetched.commit_sha[:12])
        return stored

    def _drop_lost_archive(self, stored: ProxiedVersion, sha256: str) -> None:
        """Another process recorded the version first, from other upstream bytes:
        the archive this fill stored is removed unless a row names it (the same
        bytes may be another version's). Identical bytes are one blob, the
        winner's, and are never removed here."""
        where = f"{stored.module_key} {stored.version}"
        log.info("%s: another fetch recorded it first; this fetch's archive is not used", where)
        try:
            if not self._store.blob_referenced(sha256) and self.blobs.delete(sha256):
                log.info("%s: removed the unused archive %s", where, sha256)
        except GitregError as exc:
            log.warning("%s: cannot remove the unused archive %s: %s", where, sha256, exc)

    async def _fetch(self, source: GitSource | ArchiveSource) -> FetchedArchive:
        limits = FetchLimits(
            self.options.git_timeout, self.options.max_fetch_bytes, self.options.archive
        )
        if isinstance(source, GitSource):
            return await anyio.to_thread.run_sync(
                lambda: fetch_archive(source, self.blobs, limits, self.workdir)
            )
        # The temp directory's making and removal (the download and the unpacked
        # repository's loose objects) are file work: a thread does them, not the loop.
        temp = Path(await anyio.to_thread.run_sync(self._temp_dir))
        try:
            downloaded = temp / "download"
            out = await anyio.to_thread.run_sync(downloaded.open, "wb")
            with out:
                await self.upstream.download_to(source.url, out, self.options.max_fetch_bytes)
            return await anyio.to_thread.run_sync(
                lambda: archive_from_download(
                    downloaded, source.kind, self.blobs, limits, temp / "repo"
                )
            )
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(shutil.rmtree, temp, True)

    def _temp_dir(self) -> str:
        self.workdir.mkdir(parents=True, exist_ok=True)
        return tempfile.mkdtemp(prefix="proxy-", dir=self.workdir)

    async def location(
        self,
        address: ModuleAddress,
        version: str,
        base: str,
        access: Access,
        who: PrincipalSource,
    ) -> str:
        """The download location for a reader: access is checked before anything
        is fetched, so a private proxied namespace never leaks (or fetches) anything."""
        not_found = f"module {address} not found"
        private = await access.check_read(address.namespace, not_found, who)
        record = await self.cached(address, version)
        location = base + archive_path(record.archive_sha256)
        if record.subdir:
            location += "//" + record.subdir
        if private:
            location += "?" + access.signer.sign(archive_path(record.archive_sha256))
        return location

    # -- the cache's contents -------------------------------------------------------------

    async def prefetch(self, path: Path, report: Report) -> PrefetchResult:
        """Cache every version, meeting its constraint, of every proxied module the
        configurations under `path` call, and of the modules those call in turn
        (gitreg/module_proxy/prefetch.py). A module's failure is recorded in the
        result, not raised; ConfigError when `path` is no directory."""
        return await prefetch(self, self.blobs, path, report)

    def cached_versions(self) -> list[ProxiedVersion]:
        """Every cached module version. Blocking."""
        return self._store.versions()

    def moves(self) -> list[ProxiedMove]:
        """Every recorded upstream ref that moved after its version was cached. Blocking."""
        return self._store.moves()

    def export(self, dest: Path) -> ModuleTransfer:
        """Write every cached version and its archive below `dest/modules`, for
        another gitreg's `import` (gitreg/module_proxy/export.py). Blocking."""
        return export_modules(self._store, self.blobs, dest)

    def import_from(self, src: Path) -> ModuleTransfer:
        """Cache the versions an `export` wrote below `src/modules`, each archive
        verified against its sha256 first; a version cached here already keeps
        its own bytes. Blocking."""
        result = import_modules(self._store, self.blobs, src)
        self.cache.invalidate()  # the access snapshot learns the new blobs' owners
        return result

    # -- moved tags -----------------------------------------------------------------------

    async def check_moves(self) -> list[ProxiedMove]:
        """Ask where each cached version's ref points now; record (and return) new moves."""
        found: list[ProxiedMove] = []
        for record in await anyio.to_thread.run_sync(self._store.versions):
            move = await self._check_one(record)
            if move is not None:
                found.append(move)
        return found

    async def _check_one(self, record: ProxiedVersion) -> ProxiedMove | None:
        source = parse_source(record.location)
        if not isinstance(source, GitSource):
            return None  # a plain archive has no ref; its bytes were pinned by sha256
        try:
            now = await anyio.to_thread.run_sync(
                lambda: remote_commit(source, self.options.git_timeout)
            )
        except UpstreamError as exc:
            log.warning("%s %s: cannot check its ref: %s", record.module_key, record.version, exc)
            return None
        if now is None or now == record.commit_sha:
            return None
        move = ProxiedMove(
            record.module_key, record.version, record.ref, record.commit_sha, now, time.time()
        )
        if not await anyio.to_thread.run_sync(self._store.record_move, move):
            return None
        log.warning(
            "%s %s: upstream ref %s moved from %s to %s; the cached archive is kept",
            record.module_key,
            record.version,
            record.ref,
            record.commit_sha[:12],
            now[:12],
        )
        return move

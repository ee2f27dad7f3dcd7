"""`Oci`: the read side of the OCI Distribution Specification v1.1 over
gitreg's releases, as the `/v2/` handlers and the registry protocols ask it.

Every answer is a function of what gitreg already holds: a module version's
manifest names the zip built once from its registry archive (`zips.py`); a
provider version's index lists one manifest per platform whose layer is the
release zip itself. What a repository holds is read once per change of the
index into a `RepoView` kept in the metadata cache, so a manifest or a tag
list costs what a module `versions` answer costs.

Reading follows the registry protocol's rules exactly: the namespace's
privacy is decided before anything about the repository is looked up, so a
private namespace's repositories answer 401 without credentials and 404 with
a token for another namespace, whether they exist or not.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
import shutil
import tarfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import anyio

from gitreg.addresses import ModuleAddress
from gitreg.auth.service import Access, Credentials
from gitreg.auth.tokens import Principal, Scope
from gitreg.cache import MetadataCache
from gitreg.errors import (
    BadRequest,
    Forbidden,
    GitregError,
    NotFound,
    StorageUnavailable,
    Unauthorized,
    UnknownReference,
)
from gitreg.mirror.options import mirror_options
from gitreg.mirror.store import MirrorIndex
from gitreg.module_proxy.service import ModuleProxyService
from gitreg.module_proxy.store import ModuleProxyIndex
from gitreg.oci import grants
from gitreg.oci.downloads import oci_source, reads_oci
from gitreg.oci.manifests import (
    EMPTY,
    EMPTY_BYTES,
    INDEX,
    MANIFEST,
    Document,
    Layer,
    module_manifest,
    platform_config,
    provider_index,
    provider_manifest,
    referrers_index,
    tags_document,
)
from gitreg.oci.names import (
    DIGEST_RE,
    TAG_RE,
    RepoName,
    is_digest,
    parse_name,
    tag_of,
    version_of,
)
from gitreg.oci.store import ModuleZip, OciIndex
from gitreg.oci.zips import BUILDER, tar_to_zip
from gitreg.providers.store import ProviderIndex
from gitreg.settings import Settings
from gitreg.storage.blobs import BlobStore
from gitreg.storage.protocols import ModuleIndex
from gitreg.versions import parse_tag_version

log = logging.getLogger("gitreg.oci")

# Which upstream host a mirrored provider named without one is looked up at
# first, when the mirror holds it from several.
PREFERRED_HOSTS = ("registry.opentofu.org", "registry.terraform.io")
MAX_TAGS_PAGE = 1000

# Who is asking, built only when an access decision needs it: a public
# repository's answer never looks at the request's credentials.
Who = Callable[[], Credentials]

# Manifests whose `subject` is a digest in a repository: (repository, digest) ->
# the referring manifests. The attestations feature adds its source here.
ReferrerSource = Callable[[RepoName, str], list[Document]]


@dataclass(frozen=True)
class RepoView:
    """What one repository holds, built once per change of the index."""

    tags: tuple[str, ...]  # listed tags, in lexical order (the order `last` pages by)
    manifests: dict[str, Document]  # tag -> manifest or index, every version that has one
    by_digest: dict[str, Document]  # digest -> manifests, indexes and config blobs
    layers: dict[str, Layer]  # digest -> a zip in the blob store
    # Module versions whose zip is not built yet: tag -> (archive sha256, title, version).
    pending: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    proxied: bool = False  # tags and unbuilt versions come from the module proxy
    subdir: str = ""  # a module's directory in its package (a monorepo)
    _made: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)

    def tags_body(self, name: str) -> bytes:
        """The `tags/list` answer listing every tag, made on first use."""
        made = self._made.get("tags")
        if made is None:
            made = self._made["tags"] = tags_document(name, list(self.tags))
        return made

    @property
    def cache_bytes(self) -> int:
        """About what the view holds, for the metadata cache's bound."""
        documents = sum(d.size for d in self.by_digest.values())
        return documents + 200 * (len(self.by_digest) + len(self.tags) + len(self.pending))


@dataclass(frozen=True)
class TagPage:
    name: str
    tags: list[str]
    more: bool  # a next page exists: the answer carries a `Link` to it
    body: bytes = b""  # the whole list's answer, made once per view, when that was asked
    private: bool = False  # its namespace is private: never kept by a shared cache


@dataclass(frozen=True)
class Manifest:
    document: Document
    private: bool  # its namespace is private: never kept by a shared cache


@dataclass(frozen=True)
class Blob:
    """A blob's answer: `document` for a config (bytes in memory), `layer` for a
    zip in the blob store; `private` when its namespace is private."""

    digest: str
    document: Document | None
    layer: Layer | None
    private: bool


@dataclass(frozen=True)
class ZipsReport:
    built: int
    present: int  # already built before
    failed: int


@dataclass(frozen=True)
class PullToken:
    token: str
    expires_in: int
    issued_at: str


def _layers(view_layers: dict[str, Layer], layer: Layer) -> None:
    view_layers["sha256:" + layer.sha256] = layer


def _empty_config() -> Document:
    return Document(EMPTY, EMPTY_BYTES)


class Oci:
    def __init__(
        self,
        *,
        settings: Settings,
        store: OciIndex,
        modules: ModuleIndex,
        proxy: ModuleProxyService,
        proxied: ModuleProxyIndex,
        providers: ProviderIndex,
        mirror: MirrorIndex,
        blobs: BlobStore,
        cache: MetadataCache[object],
        access: Access,
    ) -> None:
        self._module_prefix = settings.oci_module_prefix
        self._provider_prefix = settings.oci_provider_prefix
        # The names gitreg's own providers go by in a provider address
        # (`HOST/NS/TYPE`), as the mirror knows them.
        self._own_hosts = mirror_options(settings).local_hostnames
        self._store = store
        self._modules = modules
        self._proxy = proxy
        self._proxied = proxied
        self._providers = providers
        self._mirror = mirror
        self._blobs = blobs
        self._cache = cache
        self._access = access
        self._referrers: list[ReferrerSource] = []
        # archive sha256 -> (its build's lock, the threads holding or awaiting it)
        self._building: dict[str, tuple[threading.Lock, int]] = {}
        self._building_lock = threading.Lock()

    # -- who may read -------------------------------------------------------------------

    def add_referrers(self, source: ReferrerSource) -> None:
        """Let another feature list manifests that refer to a digest."""
        self._referrers.append(source)

    def repository(self, name: str) -> RepoName:
        """What a repository name names; NotFound (NAME_UNKNOWN) for a name no
        gitreg repository can have."""
        found = parse_name(name, self._module_prefix, self._provider_prefix)
        if found is None:
            raise NotFound(f"repository {name[:300]} not found")
        return found

    async def _principal(self, who: Credentials, repo: RepoName | None) -> Principal | None:
        """The principal behind a `/v2/` request: a pull token from `/v2/token`
        (good for the repositories it names), a gitreg token as Bearer, or a
        gitreg token as the Basic password. Unauthorized for a bad credential."""
        header = who.authorization
        if header is None:
            return None
        scheme, _, value = header.strip().partition(" ")
        value = value.strip()
        if scheme.lower() in ("basic", "bearer"):
            self._access.limiter.check(who.client)
        if scheme.lower() == "basic":
            password = _basic_password(value)
            if password is None:
                self._access.limiter.failed(who.client)
                raise Unauthorized("malformed Basic credentials")
            return await self._access.principal(
                dataclasses.replace(who, authorization="Bearer " + password)
            )
        if scheme.lower() == "bearer" and grants.is_grant(value):
            try:
                grant = grants.read(self._access.signer, value)
            except Forbidden as exc:
                self._access.limiter.failed(who.client)
                raise Unauthorized(f"registry token refused: {exc}") from exc
            if repo is None or repo.name in grant.denied:
                return Principal(grant.token_id, Scope.read, frozenset(), None, grants={})
            if repo.name not in grant.repositories:
                raise grants.InsufficientScope(f"this registry token does not cover {repo.name}")
            allowed = {repo.namespace: Scope.read}
            return Principal(grant.token_id, Scope.read, frozenset(), None, grants=allowed)
        return await self._access.principal(who)

    async def _allow(self, who: Who, repo: RepoName) -> bool:
        """Allow reading `repo` or raise as the registry protocol would for its
        namespace; whether the namespace is private."""
        if self._access.known_public(repo.namespace):
            return False
        return await self._access.check_read(
            repo.namespace,
            f"repository {repo.name} not found",
            lambda: self._principal(who(), repo),
        )

    async def check_base(self, who: Credentials) -> None:
        """`GET /v2/`: 200 for good credentials, 401 for bad ones or none. The
        401 is the challenge that tells a client (`skopeo`, `docker login`)
        where the token endpoint is: clients that read challenges only here
        would otherwise never send their credentials. Public content needs
        none: the token endpoint hands out anonymous pull tokens, and the other
        routes serve public repositories without any token."""
        if who.authorization is None:
            raise Unauthorized("authentication required: ask the realm for a pull token")
        await self._principal(who, None)

    async def pull_token(self, who: Credentials, scopes: list[str]) -> PullToken:
        """The `/v2/token` answer: a token for those of the `repository:NAME:pull`
        scopes asked that are private and that `who` may read. Other
        well-formed scopes (another action, another resource type, a public
        repository, one gitreg does not serve or `who` may not read) are left
        out, those refused to credentials recorded as such, so that the
        registry answers them 404 rather than another challenge. BadRequest
        for a malformed scope, Unauthorized for bad credentials."""
        asked = grants.parse_scopes(scopes)
        principal = await self._principal(who, None) if who.authorization else None
        granted: list[str] = []
        denied: list[str] = []
        for scope in asked:
            if scope.type != "repository" or "pull" not in scope.actions:
                continue
            repo = parse_name(scope.name, self._module_prefix, self._provider_prefix)
            if repo is None:
                continue
            private = await self._private_for(repo, principal)
            if private:
                granted.append(repo.name)
            elif private is None and principal is not None:
                denied.append(repo.name)
        token_id = principal.token_id if principal is not None else 0
        token, ttl = grants.issue(self._access.signer, granted, denied, token_id)
        issued = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return PullToken(token, ttl, issued)

    async def _private_for(self, repo: RepoName, principal: Principal | None) -> bool | None:
        """True when `repo` is private and `principal` may read it, False when
        it is public, None when `principal` may not read it. Only the first
        goes into a pull token: a public repository is read without one, and
        a token listing it would open it for its lifetime should its
        namespace be made private."""

        async def holder() -> Principal | None:
            return principal

        try:
            return await self._access.check_read(repo.namespace, "", holder)
        except (Unauthorized, NotFound):
            return None

    # -- the read side --------------------------------------------------------------------

    async def tags(self, who: Who, name: str, n: int | None, last: str) -> TagPage:
        """`tags/list`: at most `n` tags after `last`, in lexical order."""
        repo = self.repository(name)
        private = await self._allow(who, repo)
        view = await self._view(repo)
        if n is None and not last and not view.proxied and len(view.tags) <= MAX_TAGS_PAGE:
            body = view.tags_body(repo.name)
            return TagPage(repo.name, list(view.tags), False, body, private)
        tags = list(view.tags)
        if view.proxied:
            tags = sorted(tag_of(v) for v in await self._proxy.versions(self._module(repo)))
        if last:
            tags = [t for t in tags if t > last]
        limit = MAX_TAGS_PAGE if n is None else min(n, MAX_TAGS_PAGE)
        return TagPage(repo.name, tags[:limit], len(tags) > limit, private=private)

    async def manifest(self, who: Who, name: str, reference: str) -> Manifest:
        """A manifest or index by tag or digest; UnknownReference (MANIFEST_UNKNOWN)
        when the repository has none by that reference."""
        repo = self.repository(name)
        private = await self._allow(who, repo)
        return Manifest(await self._manifest(repo, reference), private)

    async def _manifest(self, repo: RepoName, reference: str) -> Document:
        view = await self._view(repo)
        unknown = UnknownReference(f"manifest {reference[:80]} not found in {repo.name}")
        if is_digest(reference):
            found = view.by_digest.get(reference)
            if found is None or found.media_type not in (MANIFEST, INDEX):
                raise unknown
            return found
        if not TAG_RE.fullmatch(reference):
            raise unknown
        found = view.manifests.get(reference)
        if found is not None:
            return found
        if reference in view.pending:
            archive, title, version = view.pending[reference]
            return await self._built_module_manifest(archive, title, version)
        if view.proxied:
            return await self._proxied_manifest(repo, reference, unknown)
        raise unknown

    async def blob(self, who: Who, name: str, digest: str) -> Blob:
        """A config blob or a layer of the repository. BadRequest
        (DIGEST_INVALID) for a malformed digest, UnknownReference (BLOB_UNKNOWN)
        for one the repository does not hold."""
        repo = self.repository(name)
        if not DIGEST_RE.fullmatch(digest):
            raise BadRequest(f"invalid digest {digest[:80]!r}: only sha256 digests are served")
        private = await self._allow(who, repo)
        view = await self._view(repo)
        layer = view.layers.get(digest)
        if layer is not None:
            return Blob(digest, None, layer, private)
        document = view.by_digest.get(digest)
        if document is not None and document.media_type not in (MANIFEST, INDEX):
            return Blob(digest, document, None, private)
        raise UnknownReference(f"blob {digest} not found in {repo.name}")

    async def referrers(
        self, who: Who, name: str, digest: str, artifact_type: str = ""
    ) -> Manifest:
        """The referrers API: an image index of the manifests whose subject is
        `digest`, filtered by `artifact_type` when given. Empty when nothing
        refers to it, as the spec asks even for an unknown digest."""
        repo = self.repository(name)
        if not DIGEST_RE.fullmatch(digest):
            raise BadRequest(f"invalid digest {digest[:80]!r}: only sha256 digests are served")
        private = await self._allow(who, repo)
        found: list[Document] = []
        for source in self._referrers:
            found.extend(await anyio.to_thread.run_sync(source, repo, digest))
        if artifact_type:
            found = [d for d in found if d.artifact_type == artifact_type]
        return Manifest(referrers_index(found), private)

    # -- modules --------------------------------------------------------------------------

    def _module(self, repo: RepoName) -> ModuleAddress:
        namespace, name, system = repo.parts
        return ModuleAddress(namespace, name, system)

    def _title(self, repo: RepoName, version: str) -> str:
        return "-".join(repo.parts[1:]) + f"-{tag_of(version)}.zip"

    def module_zip(self, archive_sha256: str) -> ModuleZip:
        """The zip of a module archive, built and recorded the first time it is
        asked for (blocking: from a worker thread). Requests in this process
        for an archive being built wait for that build; another process may
        build the same bytes at the same time, and the first record wins."""
        found = self._store.module_zip(archive_sha256)
        if found is not None:
            return found
        with self._building_lock:
            lock, waiting = self._building.get(archive_sha256, (threading.Lock(), 0))
            self._building[archive_sha256] = (lock, waiting + 1)
        try:
            with lock:
                return self._store.module_zip(archive_sha256) or self._build_zip(archive_sha256)
        finally:
            with self._building_lock:
                lock, waiting = self._building[archive_sha256]
                if waiting == 1:
                    del self._building[archive_sha256]
                else:
                    self._building[archive_sha256] = (lock, waiting - 1)

    def _build_zip(self, archive_sha256: str) -> ModuleZip:
        with self._blobs.scratch_file("oci-zip") as path:
            try:
                with self._blobs.open(archive_sha256) as source, path.open("w+b") as out:
                    tar_to_zip(source, out)
                    out.seek(0)
                    with self._blobs.writer() as sink:
                        shutil.copyfileobj(out, sink, 1024 * 1024)
            except (tarfile.TarError, zlib.error, EOFError) as exc:
                raise StorageUnavailable(
                    f"module archive {archive_sha256} cannot be read", reason=str(exc)
                ) from exc
        stored = sink.result
        assert stored is not None
        record = ModuleZip(archive_sha256, stored.sha256, stored.size, BUILDER)
        kept = self._store.add_module_zip(record)
        # Every view holding this archive as pending is stale now, in this
        # process at once; the others notice the commit as they notice a publish.
        self._cache.invalidate()
        return kept

    def build_module_zips(self) -> ZipsReport:
        """Build the zip of every hosted and cached proxied module version that
        has none yet (blocking): what the first pull of each would otherwise
        do. Idempotent; an archive that cannot be read is counted, not fatal."""
        archives = {
            v.archive_sha256 for m in self._modules.modules() for v in self._modules.versions(m.id)
        }
        archives |= {v.archive_sha256 for v in self._proxied.versions()}
        have = self._store.module_zips(sorted(archives))
        built = failed = 0
        for archive in sorted(archives - set(have)):
            try:
                self.module_zip(archive)
            except (GitregError, OSError) as exc:
                log.warning("cannot build the OCI zip of archive %s: %s", archive, exc)
                failed += 1
            else:
                built += 1
        return ZipsReport(built=built, present=len(have), failed=failed)

    async def _built_module_manifest(self, archive: str, title: str, version: str) -> Document:
        made = await anyio.to_thread.run_sync(self.module_zip, archive)
        return module_manifest(Layer(made.zip_sha256, made.zip_size, title), version)

    async def _proxied_manifest(
        self, repo: RepoName, tag: str, unknown: UnknownReference
    ) -> Document:
        """A proxied module version gitreg does not hold yet: fetched through
        the module proxy as a registry `download` would fetch it."""
        try:
            version = str(parse_tag_version(tag.replace("_", "+")))
        except BadRequest as exc:
            raise unknown from exc
        try:
            cached = await self._proxy.cached(self._module(repo), version)
        except NotFound as exc:
            raise unknown from exc
        title = self._title(repo, cached.version)
        return await self._built_module_manifest(cached.archive_sha256, title, cached.version)

    def _module_view(
        self, repo: RepoName, listed: list[tuple[str, str, bool]], proxied: bool, subdir: str = ""
    ) -> RepoView:
        """`listed`: (version, archive sha256, listed in tags) of each version."""
        zips = self._store.module_zips([archive for _, archive, _ in listed])
        tags: list[str] = []
        manifests: dict[str, Document] = {}
        by_digest: dict[str, Document] = {}
        layers: dict[str, Layer] = {}
        pending: dict[str, tuple[str, str, str]] = {}
        empty = _empty_config()
        by_digest[empty.digest] = empty
        for version, archive, shown in listed:
            tag = tag_of(version)
            if shown:
                tags.append(tag)
            title = self._title(repo, version)
            made = zips.get(archive)
            if made is None:
                pending[tag] = (archive, title, version)
                continue
            layer = Layer(made.zip_sha256, made.zip_size, title)
            document = module_manifest(layer, version)
            manifests[tag] = by_digest[document.digest] = document
            _layers(layers, layer)
        return RepoView(tuple(sorted(tags)), manifests, by_digest, layers, pending, proxied, subdir)

    def _hosted_module_view(self, repo: RepoName) -> RepoView | None:
        namespace, name, system = repo.parts
        module = self._modules.find_module(namespace, name, system)
        if module is None:
            return None
        versions = self._modules.versions(module.id)
        listed = [(v.version, v.archive_sha256, not v.yanked) for v in versions]
        return self._module_view(repo, listed, proxied=False, subdir=module.subdir)

    def _proxied_module_view(self, repo: RepoName) -> RepoView:
        upstream = self._proxy.options.upstream_for(repo.namespace)
        assert upstream is not None
        key = f"{upstream.host}/{'/'.join(repo.parts)}".lower()
        cached = self._proxied.versions(key)
        listed = [(v.version, v.archive_sha256, True) for v in cached]
        return self._module_view(repo, listed, proxied=True)

    # -- providers ------------------------------------------------------------------------

    def _provider_view(
        self, releases: list[tuple[str, bool, list[tuple[str, str, Layer]], bool]]
    ) -> RepoView:
        """`releases`: (version, listed, [(os, arch, zip)], complete) of each version."""
        tags: list[str] = []
        manifests: dict[str, Document] = {}
        by_digest: dict[str, Document] = {}
        layers: dict[str, Layer] = {}
        for version, shown, packages, complete in releases:
            if not packages:
                continue
            platforms: list[tuple[str, str, Document]] = []
            for os, arch, layer in sorted(packages, key=lambda p: (p[0], p[1])):
                config = platform_config(os, arch)
                manifest = provider_manifest(os, arch, layer)
                by_digest[config.digest] = config
                by_digest[manifest.digest] = manifest
                platforms.append((os, arch, manifest))
                _layers(layers, layer)
            index = provider_index(platforms, version, complete)
            tag = tag_of(version)
            manifests[tag] = by_digest[index.digest] = index
            if shown:
                tags.append(tag)
        return RepoView(tuple(sorted(tags)), manifests, by_digest, layers)

    def _hosted_provider_view(self, repo: RepoName) -> RepoView | None:
        namespace, type_ = repo.parts
        provider = self._providers.find_provider(f"{namespace}/{type_}")
        if provider is None:
            return None
        packages = self._providers.packages_by_version(provider.id)
        releases = [
            (
                v.version,
                not v.yanked,
                [
                    (p.os, p.arch, Layer(p.sha256, p.size, p.filename))
                    for p in packages.get(v.id, [])
                ],
                True,
            )
            for v in self._providers.provider_versions(provider.id)
        ]
        return self._provider_view(releases)

    def _mirror_key(self, repo: RepoName) -> str | None:
        if len(repo.parts) == 3:
            return "/".join(repo.parts)
        suffix = "/" + "/".join(repo.parts)
        hosts = [
            k[: -len(suffix)] for k in self._mirror.cached_provider_keys() if k.endswith(suffix)
        ]
        if not hosts:
            return None
        preferred = [h for h in PREFERRED_HOSTS if h in hosts]
        return (preferred or sorted(hosts))[0] + suffix

    def _mirrored_provider_view(self, repo: RepoName) -> RepoView | None:
        key = self._mirror_key(repo)
        if key is None:
            return None
        held = self._mirror.packages(key)
        if not held:
            return None
        upstream = self._mirror.index(key)
        platforms_of = {v.version: set(v.platforms) for v in upstream.versions} if upstream else {}
        by_version: dict[str, list[tuple[str, str, Layer]]] = {}
        for p in held:
            os, _, arch = p.platform.partition("_")
            by_version.setdefault(p.version, []).append(
                (os, arch, Layer(p.sha256, p.size, p.filename))
            )
        releases = []
        for version, packages in by_version.items():
            have = {f"{os}_{arch}" for os, arch, _ in packages}
            wanted = platforms_of.get(version)
            releases.append((version, True, packages, wanted is not None and wanted <= have))
        return self._provider_view(releases)

    # -- views ----------------------------------------------------------------------------

    async def _view(self, repo: RepoName) -> RepoView:
        if repo.kind == "module" and self._proxy.handles(repo.namespace):
            key: tuple[str, ...] = ("oci-view", "proxied", repo.name)
            found = await self._cache.get(key, lambda: self._proxied_module_view(repo))
        else:
            build = self._hosted_module_view if repo.kind == "module" else self._any_provider_view
            found = await self._cache.get(("oci-view", repo.name), lambda: build(repo))
        if found is None:
            raise NotFound(f"repository {repo.name} not found")
        assert isinstance(found, RepoView)
        return found

    def _any_provider_view(self, repo: RepoName) -> RepoView | None:
        """`ns/type`: gitreg's own provider, else a mirrored one; `host/ns/type`:
        the mirrored one, or gitreg's own when `host` is one of its names."""
        own = repo
        if len(repo.parts) == 3 and repo.parts[0] in self._own_hosts:
            own = dataclasses.replace(repo, parts=repo.parts[1:])
        hosted = self._hosted_provider_view(own) if len(own.parts) == 2 else None
        return hosted if hosted is not None else self._mirrored_provider_view(repo)

    # -- the registry protocol's side -----------------------------------------------------

    async def module_download(
        self,
        user_agent: bytes | None,
        location: str,
        address: tuple[str, str, str, str],
        base: str,
    ) -> str:
        """The `download` location for a module version (namespace, name,
        system, version as asked), hosted or proxied, whose archive `location`
        was already resolved and allowed: an `oci://` source pinned by digest for OpenTofu 1.10 and
        later in a public namespace, `location` otherwise. A private
        namespace keeps the signed archive URL: OpenTofu reads OCI credentials
        from its own configuration, not the registry's `credentials` block."""
        namespace, name, system, version = address
        if not reads_oci(user_agent) or not self._access.known_public(namespace):
            return location
        repo = parse_name(
            "/".join((self._module_prefix, namespace, name, system)).lower(),
            self._module_prefix,
            self._provider_prefix,
        )
        if repo is None:
            return location
        try:
            digest, subdir = await self._module_digest(repo, version)
        except GitregError as exc:
            log.warning(
                "no oci:// source for %s %s, answering the archive: %s", repo.name, version, exc
            )
            return location
        return oci_source(urlsplit(base).netloc, repo.name, subdir, digest)

    async def _module_digest(self, repo: RepoName, version: str) -> tuple[str, str]:
        """The manifest digest of a module version, its zip built if it is not
        yet, and the module's directory in the package."""
        view = await self._view(repo)
        if view.proxied:
            cached = await self._proxy.cached(self._module(repo), version)
            title = self._title(repo, cached.version)
            made = await self._built_module_manifest(cached.archive_sha256, title, cached.version)
            return made.digest, cached.subdir
        wanted = version_of(version)
        key = wanted.without_build() if wanted is not None else None
        for tag in (*view.manifests, *view.pending):
            found = version_of(tag)
            if found is None or found.without_build() != key:
                continue
            if tag in view.manifests:
                return view.manifests[tag].digest, view.subdir
            return (await self._built_module_manifest(*view.pending[tag])).digest, view.subdir
        raise UnknownReference(f"{repo.name} has no version {version[:64]}")


def _basic_password(value: str) -> str | None:
    """The password of a Basic credential (the user name is not looked at), or
    None when it is malformed."""
    try:
        decoded = base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    return decoded.partition(":")[2]

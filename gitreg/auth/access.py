"""The access policy: who may read and publish what (issue 6; checklist U1, U2).

A namespace is private when set so (`gitreg namespace set NS --private`) or
when the registry default is `read_default = "token"` and it was not set
public. Reading a private namespace needs a `read` token for it, sent by
Terraform as `Authorization: Bearer` from its CLI credentials. Without a
token the answer is 401 (Terraform then names the authentication problem);
with a token for another namespace it is 404, exactly like a namespace that
does not exist, so nothing leaks. Publishing needs a `publish` token (403
otherwise).

Blobs are served by sha256 on several routes (`/archives/`, provider files,
mirror zips), so the decision for a blob weighs every namespace that owns it,
whichever route advertised it: a mirror zip belongs to the upstream namespace
the mirror serves it under. A private blob needs a current signed URL or a read
token for one of its owners.

The policy is a snapshot built off the event loop and kept in the metadata
cache, so a request costs one dictionary lookup; revocations and visibility
changes made by any process apply within `refresh_interval`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request

from gitreg.auth.ratelimit import FailureLimiter
from gitreg.auth.signed_urls import UrlSigner
from gitreg.auth.tokens import Principal, Scope, token_hash
from gitreg.cache import MetadataCache
from gitreg.errors import Forbidden, NotFound, Unauthorized
from gitreg.settings import Settings
from gitreg.storage.protocols import AuthIndex

# Each source lists (lower-cased namespace, blob sha256) for the blobs it serves.
BlobOwners = Callable[[], list[tuple[str, str]]]

AUTH_REQUIRED = (
    "authentication required: this namespace is private; add a read token for this host"
    " to your Terraform CLI configuration (credentials block)"
)


@dataclass(frozen=True)
class AccessSnapshot:
    tokens: dict[str, Principal]
    visibility: dict[str, bool]
    default_private: bool
    # sha256 -> the private namespaces owning it, for blobs no public namespace owns.
    private_blobs: dict[str, frozenset[str]]

    def is_private(self, namespace: str) -> bool:
        return self.visibility.get(namespace.lower(), self.default_private)


class Access:
    def __init__(
        self,
        settings: Settings,
        store: AuthIndex,
        cache: MetadataCache[object],
        signer: UrlSigner,
    ) -> None:
        self._settings = settings
        self._store = store
        self._cache = cache
        self.signer = signer
        self.limiter = FailureLimiter(settings.auth_fail_limit, settings.auth_fail_window)
        self._blob_owners: list[BlobOwners] = [store.module_archives, store.mirror_packages]

    def add_blob_owners(self, owners: BlobOwners) -> None:
        """Let another protocol (providers) declare which namespaces own its blobs."""
        self._blob_owners.append(owners)

    def build_snapshot(self) -> AccessSnapshot:
        """Blocking: read tokens, visibility and private blobs from the index."""
        tokens = {
            t.token_hash: Principal(
                token_id=t.id,
                scope=Scope.parse(t.scope),
                namespaces=frozenset(n.lower() for n in t.namespaces),
                expires_at=t.expires_at,
            )
            for t in self._store.tokens()
        }
        visibility = self._store.namespace_visibility()
        default_private = self._settings.read_default == "token"
        snapshot = AccessSnapshot(tokens, visibility, default_private, {})
        private_blobs: dict[str, frozenset[str]] = {}
        if default_private or any(visibility.values()):
            private_blobs = self._private_blobs(snapshot)
        return AccessSnapshot(tokens, visibility, default_private, private_blobs)

    def _private_blobs(self, snapshot: AccessSnapshot) -> dict[str, frozenset[str]]:
        """Every owner of every blob counts, whatever route serves it: a blob is
        private when a private namespace owns it and no public one does. Bytes
        also published in a public namespace are served publicly: anyone can
        already fetch them there, and refusing them by hash would break the
        public owner's users while hiding nothing."""
        public: set[str] = set()
        private: dict[str, set[str]] = {}
        for owners in self._blob_owners:
            for namespace, sha in owners():
                if snapshot.is_private(namespace):
                    private.setdefault(sha, set()).add(namespace)
                else:
                    public.add(sha)
        return {sha: frozenset(ns) for sha, ns in private.items() if sha not in public}

    async def snapshot(self) -> AccessSnapshot:
        found = await self._cache.get(("access-snapshot",), self.build_snapshot)
        assert isinstance(found, AccessSnapshot)
        return found

    def known_public(self, namespace: str) -> bool:
        """True when the current snapshot is cached and says `namespace` is public:
        the hot path's way to skip the full check (no coroutine, no thread)."""
        snapshot = self._cache.peek(("access-snapshot",))
        return isinstance(snapshot, AccessSnapshot) and not snapshot.is_private(namespace)

    def _client(self, request: Request) -> str:
        return request.client.host if request.client else "unknown"

    async def principal(self, request: Request) -> Principal | None:
        """The token's holder, None without a token; a bad token is 401 and counted."""
        header = request.headers.get("authorization")
        if header is None:
            return None
        client = self._client(request)
        self.limiter.check(client)
        scheme, _, token = header.partition(" ")
        snapshot = await self.snapshot()
        found = (
            snapshot.tokens.get(token_hash(token.strip())) if scheme.lower() == "bearer" else None
        )
        if found is None or found.expired():
            self.limiter.failed(client)
            raise Unauthorized("invalid, expired or revoked token")
        return found

    async def require_read(self, request: Request, namespace: str, not_found: str) -> bool:
        """Allow reading `namespace` or raise; returns whether the namespace is private."""
        snapshot = await self.snapshot()
        if not snapshot.is_private(namespace):
            return False
        principal = await self.principal(request)
        if principal is None:
            raise Unauthorized(AUTH_REQUIRED)
        if not principal.allows(Scope.read, namespace):
            raise NotFound(not_found)
        return True

    async def authenticate(self, request: Request, scope: Scope) -> Principal:
        """A valid token of at least `scope` (namespaces checked later by the caller,
        once it knows them), else 401/403."""
        principal = await self.principal(request)
        if principal is None:
            raise Unauthorized(f"this action needs a {scope.name} token (gitreg token create)")
        if principal.scope < scope:
            raise Forbidden(f"this action needs a {scope.name} token")
        return principal

    async def require(self, request: Request, scope: Scope, namespace: str | None) -> Principal:
        """Publishing and admin actions: a token with `scope` for `namespace`, else 401/403."""
        principal = await self.authenticate(request, scope)
        if not principal.allows(scope, namespace):
            where = f"namespace {namespace}" if namespace else "the whole registry"
            raise Forbidden(f"this token may not {scope.name} in {where}")
        return principal

    async def check_blob(self, request: Request, sha256: str) -> bool:
        """Serve a private blob only with a current signed URL for this path (U2)
        or a read token for a namespace owning it, as the advertising routes
        decide; raise otherwise. Returns whether the blob is private."""
        owners = (await self.snapshot()).private_blobs.get(sha256)
        if owners is None:
            return False
        if "signature" not in request.query_params and "authorization" in request.headers:
            principal = await self.principal(request)
            if principal and any(principal.allows(Scope.read, ns) for ns in owners):
                return True
        self.verify_signature(request)
        return True

    def verify_signature(self, request: Request) -> None:
        """Raise Forbidden (counted as a failure) unless the URL carries a current
        signature for its own path (U2)."""
        client = self._client(request)
        self.limiter.check(client)
        self.signer.reload_if_rotated()
        try:
            self.signer.verify(request.url.path, request.query_params)
        except Forbidden:
            self.limiter.failed(client)
            raise

    def signed(self, path: str) -> str:
        return f"{path}?{self.signer.sign(path)}"

"""The access policy: who may read and publish what (docs/security.md).

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

The policy is a snapshot built off the event loop and kept in a cache of its
own, so a request costs one dictionary lookup. Whenever the metadata cache is
invalidated (a publish in this process at once; a commit by any other process
within `refresh_interval`), the next request re-reads the store's cheap
`AccessSignature` and keeps the snapshot unless tokens, visibility or blob
owners changed: a yank, a sync report or another worker's job traffic no
longer costs a rebuild of every blob owner. New blobs are re-weighed only when
a namespace can be private at all, so a newly published private blob is never
served publicly, and a revoked token stops working within the same bound.

`Namespaces` sets and lists the visibility the policy reads; tokens are made
and revoked by `gitreg.auth.tokens.Tokens`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from anyio.to_thread import run_sync

from gitreg.addresses import check_name
from gitreg.audit.actor import Actor, act_as
from gitreg.audit.service import UNRECORDED, AuditLog
from gitreg.auth.ratelimit import FailureLimiter
from gitreg.auth.signed_urls import UrlSigner
from gitreg.auth.store import AccessSignature, AuthIndex
from gitreg.auth.tokens import Principal, Scope, token_hash
from gitreg.cache import MetadataCache
from gitreg.errors import Forbidden, NotFound, Unauthorized
from gitreg.metrics import service as metrics
from gitreg.settings import Settings

# Each source lists (lower-cased namespace, blob sha256) for the blobs it serves.
BlobOwners = Callable[[], list[tuple[str, str]]]

# Who is asking, authenticated only when called: a public namespace's answer
# never looks at the token, so a stale one in the CLI configuration is no 401.
PrincipalSource = Callable[[], Awaitable[Principal | None]]

AUTH_REQUIRED = (
    "authentication required: this namespace is private; add a read token for this host"
    " to your Terraform CLI configuration (credentials block)"
)


def _ignore(token_id: int) -> None:
    pass


class WorkloadTokens(Protocol):
    """CI workload identity tokens (gitreg/workload_identity/service.py)."""

    def accepts(self, token: str) -> bool:
        """Whether `token` is one to judge here rather than a gitreg token."""
        ...

    async def principal(self, token: str, client: str) -> Principal:
        """Its holder; Unauthorized, Forbidden or IssuerUnavailable otherwise."""
        ...


def _actor(principal: Principal, client: str) -> Actor:
    if principal.subject:
        return Actor("workload", principal.subject, principal.rule, client)
    return Actor("token", f"token #{principal.token_id}", client=client)


@dataclass(frozen=True)
class Credentials:
    """What a request says about who sends it, built once per request by the
    HTTP layer: the policy never sees the request itself."""

    authorization: str | None  # the Authorization header, as sent
    client: str  # the client's address: it keys the failed-authentication limit
    path: str = ""  # the request path and its query parameters, for a signed URL
    query: Mapping[str, str] = field(default_factory=dict)
    # Told the id of the token that authenticated, for the access line; never the token.
    noted: Callable[[int], None] = _ignore


@dataclass(frozen=True)
class AccessSnapshot:
    tokens: dict[str, Principal]
    visibility: dict[str, bool]
    default_private: bool
    # sha256 -> the private namespaces owning it, for blobs no public namespace owns.
    private_blobs: dict[str, frozenset[str]]

    def is_private(self, namespace: str) -> bool:
        return self.visibility.get(namespace.lower(), self.default_private)

    def any_private(self) -> bool:
        """Whether any namespace can be private; if not, no blob can be."""
        return self.default_private or any(self.visibility.values())

    def holder(self, token: str) -> Principal | None:
        """The holder of a token (a Bearer value or the UI's cookie); None when
        it is unknown, revoked or expired."""
        found = self.tokens.get(token_hash(token.strip()))
        return None if found is None or found.expired() else found


@dataclass(frozen=True)
class _Cached:
    snapshot: AccessSnapshot
    signature: AccessSignature
    # The metadata cache's generation when the signature was read: while it
    # has not moved, nothing was published or committed elsewhere since.
    generation: int


class Access:
    def __init__(
        self,
        settings: Settings,
        store: AuthIndex,
        cache: MetadataCache[object],
        signer: UrlSigner,
        *,
        audit: AuditLog = UNRECORDED,
    ) -> None:
        self._audit = audit
        self._settings = settings
        self._store = store
        self._cache = cache  # only its generation is used, as the change signal
        self._cached: _Cached | None = None
        self._cached_lock = threading.Lock()
        self.signer = signer
        self.limiter = FailureLimiter(settings.auth_fail_limit, settings.auth_fail_window)
        self._blob_owners: list[BlobOwners] = [store.module_archives]
        self._workloads: WorkloadTokens | None = None

    def trust_workloads(self, workloads: WorkloadTokens) -> None:
        """Accept CI workload identity tokens wherever a gitreg token is accepted."""
        self._workloads = workloads

    def add_blob_owners(self, owners: BlobOwners) -> None:
        """Let another protocol (providers, the mirror) declare which namespaces own its blobs."""
        self._blob_owners.append(owners)

    def build_snapshot(self) -> AccessSnapshot:
        """Blocking: read tokens, visibility and private blobs from the index."""
        tokens = {
            t.token_hash: Principal(
                token_id=t.id,
                scope=Scope.parse(t.scope),
                namespaces=frozenset(n.lower() for n in t.namespaces),
                expires_at=t.expires_at,
                grants=(
                    {ns: Scope.parse(scope) for ns, scope in t.grants.items()}
                    if t.grants is not None
                    else None
                ),
            )
            for t in self._store.tokens()
        }
        visibility = self._store.namespace_visibility()
        default_private = self._settings.read_default == "token"
        return self._with_private_blobs(AccessSnapshot(tokens, visibility, default_private, {}))

    def _with_private_blobs(self, snapshot: AccessSnapshot) -> AccessSnapshot:
        if not snapshot.any_private():
            return snapshot
        return dataclasses.replace(snapshot, private_blobs=self._private_blobs(snapshot))

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

    def _current(self) -> AccessSnapshot | None:
        cached = self._cached
        if cached is None or cached.generation != self._cache.generation:
            return None
        return cached.snapshot

    async def snapshot(self) -> AccessSnapshot:
        current = self._current()
        return current if current is not None else await run_sync(self.refresh_snapshot)

    def refresh_snapshot(self) -> AccessSnapshot:
        """Blocking: the snapshot, rebuilt only in the parts whose signature moved.

        The generation is read before the signature and the signature before the
        rows, so a change committed during the build leaves an older signature
        (or generation) behind and is picked up by the next call."""
        generation = self._cache.generation
        signature = self._store.access_signature()
        cached = self._cached
        if cached is None or cached.signature.credentials != signature.credentials:
            snapshot = self.build_snapshot()
        elif cached.signature.blobs != signature.blobs:
            snapshot = self._with_private_blobs(cached.snapshot)
        else:
            snapshot = cached.snapshot
        with self._cached_lock:
            # Refreshes may finish out of order: never replace a newer one.
            if self._cached is None or self._cached.generation <= generation:
                self._cached = _Cached(snapshot, signature, generation)
        return snapshot

    def known_public(self, namespace: str) -> bool:
        """True when the current snapshot is cached and says `namespace` is public:
        the hot path's way to skip the full check (no coroutine, no thread)."""
        snapshot = self._current()
        return snapshot is not None and not snapshot.is_private(namespace)

    def known_token_id(self, authorization: str) -> int:
        """The id of the valid token in an Authorization value, 0 when there is
        none or no snapshot is cached; never raises and never counts a failure
        (download counting, gitreg/usage/http_counting.py, asks after answering)."""
        snapshot = self._current()
        scheme, _, token = authorization.partition(" ")
        if snapshot is None or scheme.lower() != "bearer":
            return 0
        found = snapshot.holder(token)
        return found.token_id if found is not None else 0

    async def principal(self, who: Credentials) -> Principal | None:
        """The token's holder, None without a token; a bad token is 401 and counted."""
        header = who.authorization
        if header is None:
            return None
        scheme, _, token = header.partition(" ")
        found = await self._holder(token if scheme.lower() == "bearer" else None, who.client)
        who.noted(found.token_id)
        act_as(_actor(found, who.client))  # whoever this request's audit rows name
        return found

    async def check_token(self, token: str, client: str) -> Principal:
        """The holder of a token presented outside an Authorization header (the
        web UI's token form), checked exactly as a Bearer token is:
        TooManyRequests while `client` is over its failed-authentication limit,
        Unauthorized (counted) when the token is unknown, revoked or expired."""
        return await self._holder(token, client)

    async def _holder(self, token: str | None, client: str) -> Principal:
        self.limiter.check(client)
        workloads = self._workloads
        if token is not None and workloads is not None and workloads.accepts(token):
            # Shaped like a JWT, which no gitreg token is: one look, not two.
            try:
                return await workloads.principal(token.strip(), client)
            except Unauthorized:
                self.limiter.failed(client)
                metrics.auth_failed("workload")
                raise
        snapshot = await self.snapshot()
        found = snapshot.holder(token) if token is not None else None
        if found is None:
            self.limiter.failed(client)
            metrics.auth_failed("token")
            raise Unauthorized("invalid, expired or revoked token")
        return found

    async def require_read(self, who: Credentials, namespace: str, not_found: str) -> bool:
        """Allow reading `namespace` or raise; returns whether the namespace is private."""
        return await self.check_read(namespace, not_found, lambda: self.principal(who))

    async def check_read(self, namespace: str, not_found: str, who: PrincipalSource) -> bool:
        """`require_read` where the principal is known only on demand: `who` is
        asked for it only when `namespace` is private."""
        snapshot = await self.snapshot()
        if not snapshot.is_private(namespace):
            return False
        principal = await who()
        if principal is None:
            raise Unauthorized(AUTH_REQUIRED)
        if not principal.allows(Scope.read, namespace):
            raise NotFound(not_found)
        return True

    async def authenticate(self, who: Credentials, scope: Scope) -> Principal:
        """A valid token of at least `scope` (namespaces checked later by the caller,
        once it knows them), else 401/403."""
        principal = await self.principal(who)
        if principal is None:
            raise Unauthorized(f"this action needs {_a(scope)} token (gitreg token create)")
        if principal.scope < scope:
            raise Forbidden(f"this action needs {_a(scope)} token")
        return principal

    async def require(self, who: Credentials, scope: Scope, namespace: str | None) -> Principal:
        """Publishing and admin actions: a token with `scope` for `namespace`, else 401/403."""
        principal = await self.authenticate(who, scope)
        if not principal.allows(scope, namespace):
            where = f"namespace {namespace}" if namespace else "the whole registry"
            raise Forbidden(f"this token may not {scope.name} in {where}")
        return principal

    async def check_blob(self, who: Credentials, sha256: str) -> bool:
        """Serve a private blob only with a current signed URL for this path
        or a read token for a namespace owning it, as the advertising routes
        decide; raise otherwise. Returns whether the blob is private."""
        owners = (await self.snapshot()).private_blobs.get(sha256)
        if owners is None:
            return False
        if "signature" not in who.query and who.authorization is not None:
            principal = await self.principal(who)
            if principal and any(principal.allows(Scope.read, ns) for ns in owners):
                return True
        self.verify_signature(who)
        return True

    def verify_signature(self, who: Credentials) -> None:
        """Raise Forbidden (counted as a failure) unless the URL carries a current
        signature for its own path."""
        client = who.client
        self.limiter.check(client)
        try:
            self.signer.verify(who.path, who.query)
        except Forbidden:
            self.limiter.failed(client)
            metrics.auth_failed("signature")
            raise

    def signed(self, path: str) -> str:
        return f"{path}?{self.signer.sign(path)}"

    def rotate_signing_key(self) -> None:
        """Put a fresh URL-signing key first, keeping the previous one for URLs
        already handed out; every process signs with it once it has learnt it
        (gitreg.auth.signed_urls)."""
        with self._audit.recording("signing_key.rotate", "URL signing key"):
            self.signer.rotate()

    def reload_signing_keys(self) -> None:
        """Learn a key rotated by another process or replica. Blocking (on
        PostgreSQL a query): call it from a worker thread."""
        self.signer.reload_if_rotated()


class Namespaces:
    """Which namespaces are private: set one by one by an operator (`gitreg
    namespace set`), every other following `read_default`. A change reaches
    this process's access snapshot at once (`on_change`), the others' within
    `refresh_interval`."""

    def __init__(
        self, store: AuthIndex, on_change: Callable[[], None], *, audit: AuditLog = UNRECORDED
    ) -> None:
        self._store = store
        self._on_change = on_change
        self._audit = audit

    def set_private(self, namespace: str, private: bool) -> None:
        """Make `namespace` private or public; BadRequest for a name no
        namespace can have. Idempotent; names compare without regard to case."""
        check_name("namespace", namespace)
        visibility = "private" if private else "public"
        with self._audit.recording("namespace.visibility", namespace, detail=visibility):
            self._store.set_namespace_private(namespace, private)
        self._on_change()

    def visibility(self) -> dict[str, bool]:
        """Lower-cased namespace -> private, for the namespaces set explicitly."""
        return self._store.namespace_visibility()


def _a(scope: Scope) -> str:
    """The scope's name with its article: "a read", "a publish", "an admin"."""
    return f"{'an' if scope.name[0] in 'aeiou' else 'a'} {scope.name}"

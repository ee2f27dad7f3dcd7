"""What gitreg needs from its index, one protocol per aggregate.

Code outside gitreg/storage/ types against these, never against the SQLite
classes, so a second implementation (PostgreSQL) can be added beside them. Each
protocol lists only the methods code outside storage calls; each docstring
states the contract an implementation must keep: what is one transaction, what
is idempotent, what raises. Unless said otherwise, a missing row asked for by
id raises `NotFound`, and `find_*` / `*_by_*` lookups answer None instead.
The blob store's protocol is `BlobStore` in blobs.py; the catalog's
(documentation, search, download counts) are in catalog_protocols.py; the job
queue's is `JobIndex` in jobs_protocols.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from gitreg.storage.auth import AccessSignature, Identity, TokenRecord
from gitreg.storage.mirror import CachedIndex, CachedVersion, MirrorPackage
from gitreg.storage.providers import (
    KeyRecord,
    NewProviderVersion,
    PackageRecord,
    ProviderRecord,
    ProviderVersionRecord,
)
from gitreg.storage.records import (
    ConflictRecord,
    ModuleGlob,
    ModuleRecord,
    NewVersion,
    RepoRecord,
    VersionRecord,
)
from gitreg.storage.registration import ModuleGlobLink, ModuleLink, ProviderLink, RepoRow
from gitreg.storage.sessions import SessionRecord


class ModuleIndex(Protocol):
    """Repositories, the modules they feed and their published versions, plus
    the index's own upkeep (readiness, backup, change detection)."""

    def close(self) -> None:
        """Release connections; the index is not used afterwards."""
        ...

    def data_version(self) -> int:
        """A number that changes whenever any process commits a write; cheap and
        lock-free, since the metadata cache calls it on every request."""
        ...

    def check_writable(self) -> None:
        """For /readyz: raise unless a write transaction can commit now."""
        ...

    def backup(self, target: Path) -> None:
        """A consistent copy taken while others keep writing (S4), verified
        before it is kept: `target` ends up whole or absent. Raises
        `ConfigError` when the copy fails its integrity check."""
        ...

    def add_repo(self, url: str, forge_repo: str, webhook_secret: str = "") -> RepoRecord:
        """Get or create the repository with this URL (idempotent)."""
        ...

    def repo_by_url(self, url: str) -> RepoRecord: ...

    def repo(self, repo_id: int) -> RepoRecord: ...

    def repos(self) -> list[RepoRecord]:
        """Registered (not removed) repositories, in id order."""
        ...

    def repos_by_forge_name(self, forge_repo: str) -> list[RepoRecord]:
        """Registered (not removed) repositories with this forge name."""
        ...

    def record_fetch(self, repo_id: int, error: str) -> None:
        """Remember the outcome of the latest fetch ("" for success)."""
        ...

    def add_module(
        self,
        repo_id: int,
        namespace: str,
        name: str,
        system: str,
        subdir: str,
        tag_prefix: str,
        archive_scope: str = "repository",
    ) -> ModuleRecord:
        """Get or create; the address is unique regardless of case, and raises
        `Conflict` when it belongs to another repository, subdir or prefix."""
        ...

    def find_module(self, namespace: str, name: str, system: str) -> ModuleRecord | None:
        """Looked up without regard to case (module-registry-protocol.md)."""
        ...

    def modules(self) -> list[ModuleRecord]: ...

    def modules_of_repo(self, repo_id: int) -> list[ModuleRecord]: ...

    def record_sync(self, module_id: int, report_json: str) -> None: ...

    def versions(self, module_id: int) -> list[VersionRecord]:
        """Every published version of a module, yanked ones included."""
        ...

    def version_by_key(self, module_id: int, version_key: str) -> VersionRecord | None: ...

    def publish_version(self, new: NewVersion) -> bool:
        """Record a version in one transaction; False, changing nothing, when
        that version is already published (re-publishing is idempotent and a
        published version is immutable). Its archive blob is durable first (S2)."""
        ...

    def set_yanked(self, module_id: int, version_key: str, yanked: bool) -> None: ...

    def set_deprecation(
        self, module_id: int, version_key: str, reason: str | None, link: str = ""
    ) -> None:
        """Deprecate one version with a reason and optional link, or lift its
        deprecation (reason None); `NotFound` for an unknown version. A
        deprecated version stays listed and installable (issue 14)."""
        ...

    def archive_for_tree(self, tree_sha: str, mtime: int) -> tuple[str, int] | None:
        """(sha256, size) of an archive already built from this tree and mtime
        (A5: build once), or None."""
        ...

    def archive_for_subtree(self, subtree_sha: str, subdir: str) -> tuple[str, int] | None:
        """(sha256, size) of an archive of the directory `subdir` with this tree
        sha, built for an earlier tag (archive_scope 'subdir', issue 16), or None."""
        ...

    def archive_builder(self, sha256: str) -> str | None:
        """The builder recorded with an archive (gitreg/archive_format.py)."""
        ...

    def module_globs(self, repo_id: int) -> list[ModuleGlob]:
        """The `repo add --modules` patterns of a repository (docs/modules.md)."""
        ...

    def record_conflict(
        self, module_id: int, version: str, tag: str, published: str, seen: str, reason: str
    ) -> bool:
        """Remember a tag that disagrees with a published version; True only
        the first time (idempotent)."""
        ...

    def conflicts(self, module_id: int | None = None) -> list[ConflictRecord]: ...


class RegistrationIndex(Protocol):
    """Registering, changing and removing repositories (gitreg/registration.py).
    Each method is ONE transaction: a refused link leaves nothing behind."""

    def register(self, repo: RepoRow, link: ModuleLink | ProviderLink | ModuleGlobLink) -> int:
        """The repository and the module or provider it feeds, together; the
        repository id. Idempotent for the same link; raises `Conflict` when
        the address is already fed by another repository (or another subdir
        or tag prefix)."""
        ...

    def change(
        self, repo_id: int, url: str | None, module_id: int | None, subdir: str, tag_prefix: str
    ) -> None:
        """A new remote and/or a module's subdir and tag prefix, together.
        Published versions are never touched (they are immutable)."""
        ...

    def remove(self, repo_id: int, keep_versions: bool) -> bool:
        """Unregister and drop the repository's jobs; True if its row is gone,
        False if it stays marked removed because published versions still
        reference it. The version check is inside the transaction."""
        ...


class ProviderIndex(Protocol):
    """Hosted providers, their versions and packages, and signing keys."""

    def add_provider(
        self,
        namespace: str,
        type_: str,
        repo_id: int | None = None,
        forge: str = "",
        sign_releases: bool = False,
    ) -> ProviderRecord:
        """Get or create (idempotent); raises `Conflict` when another repository
        already feeds that address."""
        ...

    def find_provider(self, address_key: str) -> ProviderRecord | None: ...

    def provider(self, provider_id: int) -> ProviderRecord: ...

    def providers(self) -> list[ProviderRecord]: ...

    def providers_of_repo(self, repo_id: int) -> list[ProviderRecord]: ...

    def record_provider_sync(self, provider_id: int, report: list[str]) -> None: ...

    def add_key(
        self,
        namespace: str,
        key_id: str,
        fingerprint: str,
        ascii_armor: str,
        algorithms: tuple[str, ...],
        terraform_compatible: bool,
        origin: str,
    ) -> tuple[KeyRecord, bool]:
        """Register a key for a namespace; (record, False) when it was already
        there (idempotent)."""
        ...

    def keys(self, namespace: str | None = None, active_only: bool = False) -> list[KeyRecord]: ...

    def key(self, row_id: int) -> KeyRecord: ...

    def retire_key(self, namespace: str, key_id: str) -> KeyRecord:
        """Stop using a key for new versions; versions it signed keep serving it
        (P3). Raises `NotFound` for a key the namespace does not have."""
        ...

    def key_use_count(self, row_id: int) -> int: ...

    def provider_version(self, provider_id: int, version: str) -> ProviderVersionRecord | None: ...

    def provider_versions(self, provider_id: int) -> list[ProviderVersionRecord]:
        """Every published version of a provider, yanked ones included."""
        ...

    def set_provider_yanked(self, provider_id: int, version: str, yanked: bool) -> None:
        """Hide a version from version lists (or show it again); its files keep
        serving by exact version. Raises `NotFound` for an unknown version."""
        ...

    def packages(self, version_row: int) -> list[PackageRecord]: ...

    def packages_by_version(self, provider_id: int) -> dict[int, list[PackageRecord]]: ...

    def publish_provider_version(self, new: NewProviderVersion) -> bool:
        """A version and all its packages in ONE transaction; False, changing
        nothing, when the version exists. Every blob is durable first (S2)."""
        ...

    def blob_owners(self) -> list[tuple[str, str]]:
        """(namespace, sha256) of every served provider file, for the access
        policy on private namespaces (U2)."""
        ...


class MirrorIndex(Protocol):
    """The provider network mirror's cache (provider-network-mirror-protocol.md)."""

    def index(self, provider_key: str) -> CachedIndex | None: ...

    def save_index(
        self,
        provider_key: str,
        hostname: str,
        namespace: str,
        type_: str,
        versions: list[CachedVersion],
        fetched_at: float,
    ) -> bool:
        """Record a good upstream answer; True when the version list changed."""
        ...

    def packages(self, provider_key: str, version: str | None = None) -> list[MirrorPackage]: ...

    def package(self, provider_key: str, version: str, platform: str) -> MirrorPackage | None: ...

    def cached_provider_keys(self) -> list[str]: ...

    def add_package(self, package: MirrorPackage) -> MirrorPackage:
        """Insert unless present; the row now stored: the older one wins, so a
        cached zip never changes under its name (M4)."""
        ...

    def blob_owners(self) -> list[tuple[str, str]]:
        """(lower-cased upstream namespace, zip sha256) of every cached package."""
        ...


class AuthIndex(Protocol):
    """API tokens and namespace visibility."""

    def add_token(
        self,
        token_hash: str,
        prefix: str,
        scope: str,
        namespaces: list[str],
        description: str,
        expires_at: float | None,
    ) -> int:
        """Store a token (only its hash); its id."""
        ...

    def tokens(self, include_revoked: bool = False) -> list[TokenRecord]: ...

    def revoke(self, token_id: int) -> None:
        """Raises `NotFound` unless the token exists and is still active."""
        ...

    def set_namespace_private(self, namespace: str, private: bool) -> None:
        """Idempotent; namespaces compare without regard to case."""
        ...

    def namespace_visibility(self) -> dict[str, bool]:
        """Lower-cased namespace -> private, for namespaces set explicitly."""
        ...

    def access_signature(self) -> AccessSignature:
        """A cheap fingerprint of everything the access snapshot is built from
        (tokens, visibility, blob owners), read in one transaction: equal
        signatures mean the snapshot is still right."""
        ...

    def module_archives(self) -> list[tuple[str, str]]:
        """(lower-cased namespace, archive sha256) of every module version."""
        ...

    def add_login_token(
        self,
        token_hash: str,
        prefix: str,
        grants: dict[str, str],
        who: Identity,
        description: str,
        expires_at: float,
    ) -> int:
        """Store a sign-in token (only its hash) with its scope per namespace
        ("*" for all, `grants` not empty) and whose it is; its id."""
        ...

    def put_login_state(self, key: str, payload: str, expires_at: float, now: float) -> None:
        """Keep one step of a sign-in in flight, shared by every replica."""
        ...

    def count_login_states(self, now: float, limit: int) -> int:
        """Steps not expired at `now`, on every replica; at most `limit`."""
        ...

    def take_login_state(self, key: str, now: float) -> str | None:
        """The payload under `key`, removed atomically: a second take (here or on
        another replica) gets None, as does a take after `expires_at`."""
        ...

    def create_session(self, id_hash: str, session: SessionRecord) -> None:
        """Store a web UI session under the sha256 of its id (sweeping expired ones)."""
        ...

    def session(self, id_hash: str, now: float) -> SessionRecord | None:
        """The session under `id_hash`, unless unknown, deleted or expired at `now`."""
        ...

    def delete_session(self, id_hash: str) -> bool:
        """Sign-out: whether there was such a session."""
        ...


class SecretStore(Protocol):
    """Named secrets (URL-signing keys, provider key secrets), shared by every
    process that uses the same storage. Names are relative paths such as
    `secrets/url-signing.keys`; the file implementation keeps each at that
    path under the data directory, the database one seals each with the
    operator's key (storage/sealing.py). Each method is one transaction."""

    def get(self, name: str) -> bytes | None:
        """The secret, or None. Raises `ConfigError` if it cannot be opened
        with the configured key (the key does not match the database)."""
        ...

    def put(self, name: str, value: bytes) -> None:
        """Create or replace."""
        ...

    def add(self, name: str, value: bytes) -> bool:
        """Create unless it exists (idempotent under races); True if created."""
        ...

    def delete(self, name: str) -> bool:
        """True if it existed."""
        ...

    def names(self, prefix: str = "") -> list[str]:
        """Every stored name starting with `prefix`, sorted."""
        ...

    def version(self, name: str) -> int:
        """A number that changes whenever the value of `name` changes (0 when
        absent; it may also change on a write of the same value). One small
        read, so a process can poll it once a second to notice a rotation made
        by another."""
        ...

    def where(self, name: str) -> str:
        """Where the secret is kept, for messages to the operator."""
        ...

    def seal_webhook_secret(self, plaintext: str) -> str:
        """The value to keep in `repos.webhook_secret`: sealed and marked
        (`enc:v1:...`) when a key is configured, else unchanged."""
        ...

    def open_webhook_secret(self, stored: str) -> str:
        """The plaintext of a `seal_webhook_secret` result, or of plaintext kept
        before a key was configured. Raises `ConfigError` when it cannot be opened."""
        ...

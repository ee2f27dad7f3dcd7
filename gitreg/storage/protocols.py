"""What gitreg needs from its index, one protocol per aggregate.

Code outside gitreg/storage/ types against these, never against the SQLite
classes, so a second implementation (PostgreSQL) can be added beside them. Each
protocol lists only the methods code outside storage calls; each docstring
states the contract an implementation must keep: what is one transaction, what
is idempotent, what raises. Unless said otherwise, a missing row asked for by
id raises `NotFound`, and `find_*` / `*_by_*` lookups answer None instead.
The blob store's protocol is `BlobStore` in blobs.py; the catalog's
(documentation, search, download counts) are in catalog_protocols.py; the job
queue's is `JobIndex` in gitreg/jobs/store.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from gitreg.storage.records import (
    ConflictRecord,
    ModuleGlob,
    ModuleRecord,
    NewVersion,
    RepoRecord,
    VersionRecord,
)


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
        """A consistent copy taken while others keep writing, verified
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
        published version is immutable): the writes attached to the publish
        (gitreg/storage/attached.py) then do not run. Its archive blob is
        durable first."""
        ...

    def set_yanked(self, module_id: int, version_key: str, yanked: bool) -> None: ...

    def set_deprecation(
        self,
        module_id: int,
        version_key: str,
        reason: str | None,
        link: str = "",
    ) -> None:
        """Deprecate one version with a reason and optional link, or lift its
        deprecation (reason None); `NotFound` for an unknown version. A
        deprecated version stays listed and installable."""
        ...

    def archive_for_tree(self, tree_sha: str, mtime: int) -> tuple[str, int] | None:
        """(sha256, size) of an archive already built from this tree and mtime
        (build once), or None."""
        ...

    def archive_for_subtree(self, subtree_sha: str, subdir: str) -> tuple[str, int] | None:
        """(sha256, size) of an archive of the directory `subdir` with this tree
        sha, built for an earlier tag (archive_scope 'subdir'), or None."""
        ...

    def archive_builder(self, sha256: str) -> str | None:
        """The builder recorded with an archive (gitreg/archives/format.py)."""
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

"""Plain records the index hands out; no behaviour, no SQL."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RepoRecord:
    id: int
    url: str
    forge_repo: str
    webhook_secret: str
    last_fetch_at: str | None
    last_fetch_error: str
    removed_at: str | None = None  # unregistered, versions kept (`repo remove --keep-versions`)


@dataclass(frozen=True)
class ModuleRecord:
    id: int
    repo_id: int
    namespace: str
    name: str
    system: str
    subdir: str
    tag_prefix: str
    last_sync_at: str | None
    sync_report: str
    # 'repository': the archive is the whole repository tree (installed with
    # `//subdir`); 'subdir': only the module's directory, at its path.
    archive_scope: str = "repository"

    @property
    def address(self) -> str:
        return f"{self.namespace}/{self.name}/{self.system}"


@dataclass(frozen=True)
class VersionRecord:
    module_id: int
    version: str
    tag: str
    tag_sha: str
    commit_sha: str
    tree_sha: str
    archive_sha256: str
    archive_size: int
    published_at: str
    yanked: bool
    # `gitreg module deprecate`: None unless deprecated; the link is
    # optional ("" when none was given). The version stays listed and installable.
    deprecation_reason: str | None = None
    deprecation_link: str = ""

    @property
    def deprecated(self) -> bool:
        return self.deprecation_reason is not None


@dataclass(frozen=True)
class ConflictRecord:
    module_id: int
    version: str
    tag: str
    published_commit: str
    seen_commit: str
    reason: str
    first_seen: str


@dataclass(frozen=True)
class NewVersion:
    """What the publisher hands the index to record one version."""

    module_id: int
    version: str
    version_key: str
    tag: str
    tag_sha: str
    commit_sha: str
    tree_sha: str
    archive_sha256: str
    archive_size: int
    archive_mtime: int
    # gitreg/archives/format.py: what made the archive's bytes (recorded with it).
    archive_builder: str = "tar-pax+zlib-6"
    # For an archive of the module's directory only: that directory's tree sha
    # and path, under which the archive is kept for later tags (else "").
    archive_subtree: str = ""
    archive_subdir: str = ""


@dataclass(frozen=True)
class ModuleGlob:
    """`repo add --modules PATTERN`: every directory under PATTERN is a module
    NAMESPACE/<directory name>/SYSTEM, with tags named by `tag_pattern`."""

    repo_id: int
    pattern: str
    namespace: str
    system: str
    tag_pattern: str  # "" (shared repository tags) or e.g. "{name}/v{version}"
    archive_scope: str

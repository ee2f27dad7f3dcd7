"""What registering repositories needs from the index, and its rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class RepoRow:
    url: str
    forge_repo: str
    webhook_secret: str


@dataclass(frozen=True)
class ModuleLink:
    namespace: str
    name: str
    system: str
    subdir: str
    tag_prefix: str


@dataclass(frozen=True)
class ModuleGlobLink:
    """`repo add --modules PATTERN`: the pattern is kept, and each sync registers
    the directories under it as modules (gitreg/modules/globs.py)."""

    pattern: str
    namespace: str
    system: str
    tag_pattern: str
    archive_scope: str


@dataclass(frozen=True)
class ProviderLink:
    namespace: str
    type: str
    forge: str
    sign_releases: bool


class RegistrationIndex(Protocol):
    """Registering, changing and removing repositories (gitreg/repositories/service.py).
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

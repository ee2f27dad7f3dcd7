"""Syncing one repository: the one place that decides what a repository feeds.

A repository feeds modules (its git tags, `gitreg.modules.publisher`),
providers (its forge's releases, `gitreg.providers.service`), or both. The job
runner, for webhook-triggered syncs and for the periodic reconcile, asks
`SyncService.sync_repo` and records the `RepoSync` it returns; it never chooses
between the publishers itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gitreg.jobs.store import JobKind
from gitreg.modules.publisher import Publisher
from gitreg.providers.service import ProviderService
from gitreg.storage.protocols import ModuleIndex
from gitreg.storage.records import RepoRecord


@dataclass
class RepoSync:
    """What one sync of one repository did, modules and providers together."""

    summaries: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    yanked: list[str] = field(default_factory=list)
    registered: list[str] = field(default_factory=list)  # modules found by `--modules`
    breaking: list[str] = field(default_factory=list)  # labelled by the semver guard

    @property
    def summary(self) -> str:
        return "; ".join(self.summaries)

    def as_record(self) -> dict[str, object]:
        """The job's stored result (`gitreg jobs show`)."""
        return {
            "summary": self.summary,
            "published": self.published,
            "conflicts": self.conflicts,
            "yanked": self.yanked,
            "registered": self.registered,
            "breaking": self.breaking,
        }


class SyncService:
    """Modules from the repository's tags, providers from its forge releases."""

    def __init__(
        self,
        index: ModuleIndex,
        publisher: Publisher,
        providers: ProviderService | None = None,
    ) -> None:
        self._index = index
        self._publisher = publisher
        self._providers = providers

    def sync_repo(self, repo: RepoRecord, reason: JobKind) -> RepoSync:
        """Sync what `repo` feeds. A repository with no module and no provider
        is synced as a module repository (its fetch errors are then reported).
        For a `reconcile`, modules are synced only if the remote's tags changed."""
        result = RepoSync()
        feeds_providers = self._providers is not None and self._providers.handles(repo)
        if self._index.modules_of_repo(repo.id) or not feeds_providers:
            if reason == "reconcile" and not self._publisher.remote_has_changes(repo):
                result.summaries.append(f"{repo.url}: remote tags unchanged")
            else:
                modules = self._publisher.sync_repo(repo)
                result.summaries.append(modules.summary())
                result.published += modules.published
                result.conflicts += modules.conflicts
                result.yanked += modules.yanked
                result.registered += modules.registered
                result.breaking += modules.breaking
        if feeds_providers and self._providers is not None:
            releases = self._providers.sync_repo(repo)
            result.summaries.append(releases.summary())
            result.published += releases.published
            result.conflicts += releases.conflicts
        return result

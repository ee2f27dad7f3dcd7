"""What syncing a repository's forge releases did, release by release.

One `ReleaseOutcome` per tag tried; `ProviderSyncResult` gathers them for the
job runner, which retries pending releases, and for `gitreg provider sync`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Status = Literal["published", "unchanged", "pending", "skipped", "conflict", "failed"]


@dataclass(frozen=True)
class ReleaseOutcome:
    provider: str
    tag: str
    status: Status
    message: str = ""

    def line(self) -> str:
        return f"{self.provider} {self.tag}: {self.status}" + (
            f": {self.message}" if self.message else ""
        )


@dataclass
class ProviderSyncResult:
    """What one sync of one repository's releases did; same fields as modules'
    `SyncResult` where they mean the same, for the job runner and the CLI."""

    repo_url: str
    outcomes: list[ReleaseOutcome] = field(default_factory=list)

    def _of(self, status: Status) -> list[str]:
        return [o.line() for o in self.outcomes if o.status == status]

    @property
    def published(self) -> list[str]:
        return self._of("published")

    @property
    def conflicts(self) -> list[str]:
        return self._of("conflict")

    @property
    def pending(self) -> list[str]:
        return self._of("pending")

    @property
    def failed(self) -> list[str]:
        return self._of("failed")

    def summary(self) -> str:
        parts = [f"{len(self.published)} provider versions published"]
        for name in ("pending", "conflicts", "failed"):
            count = len(getattr(self, name))
            if count:
                parts.append(f"{count} {name}")
        return f"{self.repo_url}: " + ", ".join(parts)

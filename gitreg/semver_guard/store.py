"""What the semver guard keeps: each version's check and each repository's policy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

Policy = Literal["off", "warn", "enforce"]
POLICIES: tuple[Policy, ...] = ("off", "warn", "enforce")

# first: nothing earlier in its major line to compare with; compatible: no
# breaking change; breaking: published with breaking changes (see `exemption`);
# refused: not published (`enforce`); allowed: published by `allow-breaking`.
Status = Literal["first", "compatible", "breaking", "refused", "allowed"]


@dataclass(frozen=True)
class Check:
    """One version compared with `baseline`, the previous release of its major line."""

    module_id: int
    version_key: str
    version: str
    tag: str
    commit_sha: str
    baseline: str  # "" when status is "first"
    status: Status
    # Why a breaking version was published: "warn" (the policy), "prerelease",
    # "0.x" (semver lets anything change before 1.0.0), "" otherwise.
    exemption: str
    breaking: int  # how many breaking changes
    changes: str  # JSON: the classified changes (gitreg/semver_guard/diff.py)
    allowed_by: str = ""
    allowed_at: str | None = None
    checked_at: str = ""


class SemverIndex(Protocol):
    def put_check(self, check: Check) -> None:
        """Store (or replace) a version's check; an allowance already recorded
        for it is kept while the commit is the same."""
        ...

    def put_checks(self, checks: list[Check]) -> None:
        """`put_check` for each, in one transaction."""
        ...

    def forget_refusals(self, module_id: int, version: str) -> None:
        """Drop the conflict rows that refused `version` before anything was
        published (`published_commit` empty: the guard's), now that it is."""
        ...

    def check(self, module_id: int, version_key: str) -> Check | None: ...

    def checks(self, module_id: int) -> list[Check]:
        """A module's checks, refused versions included."""
        ...

    def checked_keys(self) -> set[tuple[int, str]]:
        """(module_id, version_key) of every stored check, for `gitreg reindex`."""
        ...

    def allow(self, module_id: int, version_key: str, by: str) -> bool:
        """Record that a refused version may publish; False if it is not refused."""
        ...

    def policy(self, repo_id: int) -> Policy | None:
        """The repository's own policy, or None (the setting applies)."""
        ...

    def set_policy(self, repo_id: int, policy: Policy | None) -> None: ...

"""Turning a repository's tags into immutable module versions.

`Publisher.sync_repo` fetches the repository into its bare mirror, maps each
tag to a version per module, and publishes what is new: the archive is built
from git objects into the blob store (durable first), then the version is
recorded in one transaction. A version, once recorded, never
changes: a tag that later names another commit is recorded as a conflict,
and a deleted tag leaves its version in place.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gitreg.archives.build import ArchiveLimits
from gitreg.archives.format import fast_builder
from gitreg.attestations.service import Attestations
from gitreg.audit.service import UNRECORDED, AuditLog
from gitreg.catalog.documenter import Documenter, Published
from gitreg.errors import ArchiveTooLarge, GitError, MirrorLocked, NotAVersion, NotFound
from gitreg.git.backend import GitBackend, TagProblem, TagRef
from gitreg.locks import file_lock
from gitreg.metrics import service as metrics
from gitreg.modules.builds import ArchiveBuilds, ArchiveKey, Built, worker_count
from gitreg.modules.globs import discover_modules
from gitreg.semver_guard.service import SemverGuard
from gitreg.settings import Settings
from gitreg.storage.blobs import BlobStore
from gitreg.storage.protocols import ModuleIndex
from gitreg.storage.records import ModuleRecord, NewVersion, RepoRecord, VersionRecord
from gitreg.versions import TagVersion, parse_version, sort_key, version_from_tag

log = logging.getLogger("gitreg.publisher")


@dataclass
class SyncResult:
    """What one sync of one repository did, for the CLI, logs and job records."""

    repo_url: str
    published: list[str] = field(default_factory=list)  # "ns/name/system 1.2.0"
    conflicts: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # "tag: reason"
    yanked: list[str] = field(default_factory=list)  # tag deleted upstream (yank_deleted_tags)
    registered: list[str] = field(default_factory=list)  # modules found under --modules
    # Published with a breaking change in a minor/patch release (the semver guard's line).
    breaking: list[str] = field(default_factory=list)
    error: str = ""

    def summary(self) -> str:
        parts = [f"{len(self.published)} published"]
        if self.registered:
            parts.insert(0, f"{len(self.registered)} modules registered")
        if self.conflicts:
            parts.append(f"{len(self.conflicts)} conflicts")
        if self.breaking:
            parts.append(f"{len(self.breaking)} with breaking changes")
        if self.error:
            parts.append(f"error: {self.error}")
        return f"{self.repo_url}: " + ", ".join(parts)


def sync_status(repo: RepoRecord) -> str:
    """One word for operators: "ok", "error" (see last_fetch_error) or "never synced"."""
    if repo.last_fetch_error:
        return "error"
    return "ok" if repo.last_fetch_at else "never synced"


# Older staging mirrors are leftovers of a killed `repo add` (a day; a fetch
# gives up after minutes).
_STALE_STAGING = 86400.0


class Publisher:
    def __init__(
        self,
        settings: Settings,
        index: ModuleIndex,
        blobs: BlobStore,
        git: GitBackend,
        on_change: Callable[[], None] = lambda: None,
        docs: Documenter | None = None,
        audit: AuditLog = UNRECORDED,
        attest: Attestations | None = None,
        semver: SemverGuard | None = None,
    ) -> None:
        self._audit = audit
        self._docs = docs  # documents made and stored at the end of each module's sync
        self._attest = attest  # signed statement and log entry, in the publish's transaction
        self._semver = semver  # compares each new version with its major line's previous release
        self._settings = settings
        self._index = index
        self._blobs = blobs
        self._git = git
        self._on_change = on_change
        limits = ArchiveLimits(
            max_total_bytes=settings.max_archive_bytes,
            max_files=settings.max_archive_files,
            max_file_bytes=settings.max_file_bytes,
        )
        # New archives use the fastest builder installed; published ones never change.
        workers = worker_count(settings.archive_workers)
        self.builds = ArchiveBuilds(git, blobs, limits, fast_builder, workers)

    def mirror_path(self, repo: RepoRecord) -> Path:
        return self._settings.git_dir / f"{repo.id}.git"

    def fetch_staged(self, url: str) -> Path:
        """Fetch a remote that is not registered yet into a fresh staging mirror,
        so `repo add` learns the URL is wrong before it writes anything (the
        caller adopts or discards it). Raises GitError, leaving nothing behind.
        Staging mirrors a killed `repo add` left behind are removed first: none
        lives longer than a fetch may run, far less than `_STALE_STAGING`."""
        for stale in self._settings.git_dir.glob("staging-*.git"):
            with contextlib.suppress(OSError):
                if stale.stat().st_mtime < time.time() - _STALE_STAGING:
                    shutil.rmtree(stale, ignore_errors=True)
        staged = self._settings.git_dir / f"staging-{secrets.token_hex(8)}.git"
        try:
            self._git.fetch(url, staged)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise
        return staged

    def adopt_staged(self, staged: Path, repo: RepoRecord) -> None:
        """Make a staged fetch the repository's mirror, unless it already has one."""
        with file_lock(self._lock_path(repo)):
            mirror = self.mirror_path(repo)
            if mirror.exists():
                shutil.rmtree(staged, ignore_errors=True)
            else:
                staged.rename(mirror)

    def drop_mirror(self, repo: RepoRecord) -> None:
        """Delete a mirror (repository removed, or its remote changed: the next
        sync starts from the new remote only)."""
        with file_lock(self._lock_path(repo)):
            shutil.rmtree(self.mirror_path(repo), ignore_errors=True)

    def _lock_path(self, repo: RepoRecord) -> Path:
        return self._settings.data_dir / "locks" / f"repo-{repo.id}.lock"

    def remote_has_changes(self, repo: RepoRecord) -> bool:
        """Whether the remote's tags differ from the mirror's (`git ls-remote`),
        so a periodic reconcile fetches only repositories that changed.
        A repository whose last sync failed counts as changed, so reconcile
        retries it and its recorded error clears as soon as it can sync."""
        if repo.last_fetch_error:
            return True
        try:
            remote = self._git.remote_tags(repo.url)
        except GitError as exc:
            self._index.record_fetch(repo.id, str(exc))
            raise
        with file_lock(self._lock_path(repo)):
            tags, problems = self._git.tags(self.mirror_path(repo))
        local = {t.name: t.tag_sha for t in tags}
        unreadable = {p.name for p in problems}
        return any(local.get(n) != sha and n not in unreadable for n, sha in remote.items()) or (
            bool(local.keys() - remote.keys())
        )

    def sync_repo(self, repo: RepoRecord) -> SyncResult:
        """Fetch and publish; blocking (call from a thread). Raises GitError."""
        if repo.removed_at is not None:
            # `repo remove --keep-versions`: its versions serve, it never syncs again.
            raise NotFound(f"repository {repo.url} was removed; its versions are kept")
        result = SyncResult(repo.url)
        with file_lock(self._lock_path(repo)):
            mirror = self.mirror_path(repo)
            try:
                self._fetch(repo, mirror)
                tags, problems = self._git.tags(mirror)
            except GitError as exc:  # kept until a sync succeeds: `repo list`, /readyz
                self._index.record_fetch(repo.id, str(exc))
                raise
            self._index.record_fetch(repo.id, "")
            # One open mirror for every read of this sync (subtrees, archives, docs).
            with self._git.session(mirror):
                self._publish_tags(repo, mirror, tags, problems, result)
        if result.published or result.yanked:
            self._on_change()
        log.info("sync %s", result.summary())
        return result

    def _publish_tags(
        self,
        repo: RepoRecord,
        mirror: Path,
        tags: list[TagRef],
        problems: list[TagProblem],
        result: SyncResult,
    ) -> None:
        """Register new `--modules` directories, then publish every module's new tags."""
        if self._semver is not None:
            self._semver.flush()  # nothing read by an earlier sync of this thread is reused
        found, not_modules = discover_modules(self._index, self._git, repo, mirror, tags)
        result.registered += found
        result.ignored += not_modules
        plans = [_plan(m, tags, problems) for m in self._index.modules_of_repo(repo.id)]
        archives = _Archives(self._index, self._blobs, self.builds, self._git, mirror)
        archives.prepare(plans, self._refused)
        for plan in plans:
            self._sync_module(repo, plan, archives, result)

    def fetch_mirror(self, repo: RepoRecord) -> Path:
        """Fetch the repository into its mirror and return it: a provider's
        documentation is read from its release tag (gitreg/catalog/provider_docs.py)."""
        with file_lock(self._lock_path(repo)):
            mirror = self.mirror_path(repo)
            self._fetch(repo, mirror)
        return mirror

    def _fetch(self, repo: RepoRecord, mirror: Path) -> None:
        """Fetch, first removing what a killed fetch left in the mirror.

        Called with the repository's lock held, so no live gitreg process is
        writing this mirror and any lock or partial pack in it is stale. A lock
        that still gets in the way is removed and the fetch tried once more.
        """
        self._remove_leftovers(repo, mirror)
        try:
            self._git.fetch(repo.url, mirror)
        except MirrorLocked:
            if not self._remove_leftovers(repo, mirror):
                raise
            self._git.fetch(repo.url, mirror)

    def _remove_leftovers(self, repo: RepoRecord, mirror: Path) -> list[str]:
        removed = self._git.remove_leftovers(mirror)
        if removed:
            log.warning(
                "%s: removed leftovers of an interrupted fetch from %s: %s",
                repo.url,
                mirror,
                ", ".join(removed),
            )
        return removed

    def _sync_module(
        self, repo: RepoRecord, plan: ModulePlan, archives: _Archives, result: SyncResult
    ) -> None:
        module, candidates, ignored = plan.module, plan.candidates, plan.ignored
        published = 0
        try:
            for tv, ref in candidates:
                outcome = self._publish_one(repo, module, tv, ref, ignored, archives)
                if outcome.startswith("published"):
                    published += 1
                    result.published.append(f"{module.address} {tv.version}")
                    if outcome.startswith("published: "):  # the semver guard's label
                        result.breaking.append(outcome.removeprefix("published: "))
                elif outcome.startswith("conflict: "):  # listed as conflicts: said once
                    reason = outcome.removeprefix("conflict: ")
                    result.conflicts.append(f"{module.address} {tv.version}: {reason}")
                elif outcome:
                    ignored.append(f"{ref.name}: {outcome}")
        except BaseException:
            # A later tag failed: the versions published before it get their
            # documents and search row now, not at the module's next tag. The
            # error that stopped the sync stays the one raised.
            if self._docs is not None and published:
                try:
                    self._docs.update_search(module)
                except Exception:
                    log.exception("%s: no search row after the failed sync", module.address)
            if self._semver is not None:
                try:
                    self._semver.flush()
                except Exception:
                    log.exception(
                        "%s: semver checks not stored (reindex makes them)", module.address
                    )
            raise
        # Once per sync, from the newest version: a repository added with
        # 40 tags rewrites its search row once, not 40 times (bench/catalog.py).
        if self._docs is not None and published:
            self._docs.update_search(module)
        if self._semver is not None:
            self._semver.flush()  # the checks of this sync, in one transaction
        result.ignored.extend(f"{module.address}: {line}" for line in ignored)
        self._index.record_sync(module.id, json.dumps(ignored))
        if self._settings.yank_deleted_tags:
            self._yank_untagged(module, {tv.key for tv, _ in candidates}, result)

    def _yank_untagged(self, module: ModuleRecord, live: set[str], result: SyncResult) -> None:
        """Opt-in: yank versions no tag maps to any more (their tag was deleted
        upstream). The archive stays downloadable; `versions` hides it."""
        for version in self._index.versions(module.id):
            key = str(parse_version(version.version).without_build())
            if version.yanked or key in live:
                continue
            with self._log_change(module, key):
                self._index.set_yanked(module.id, key, True)
            log.info("yanked %s %s: tag %s was deleted", module.address, key, version.tag)
            result.yanked.append(f"{module.address} {version.version}")

    def _log_change(
        self, module: ModuleRecord, key: str
    ) -> contextlib.AbstractContextManager[object]:
        return (
            self._attest.for_change(module, key, "yank")
            if self._attest
            else contextlib.nullcontext()
        )

    def _refused(self, module: ModuleRecord, tv: TagVersion, ref: TagRef) -> str:
        if self._semver is None:
            return ""
        return self._semver.still_refused(module, tv.key, ref.commit_sha)

    def _publish_one(
        self,
        repo: RepoRecord,
        module: ModuleRecord,
        tv: TagVersion,
        ref: TagRef,
        notes: list[str],
        archives: _Archives,
    ) -> str:
        """Publish one tag; returns "" (already there), "published", "conflict: ..."
        or the reason it was skipped. What the archive left out goes to `notes`."""
        existing = archives.existing(module, tv)
        if existing is not None:
            if existing.commit_sha == ref.commit_sha:
                return ""
            reason = (
                f"conflict: tag {ref.name} points at {ref.commit_sha[:12]}, but {tv.key}"
                f" was published from tag {existing.tag} at {existing.commit_sha[:12]};"
                " the published version is kept"
            )
            if self._index.record_conflict(
                module.id, tv.key, ref.name, existing.commit_sha, ref.commit_sha, reason
            ):
                log.warning("%s: %s", module.address, reason)
            return reason
        mirror = self.mirror_path(repo)
        refused = self._refused(module, tv, ref)
        if refused:  # refused at this commit before: reported again, nothing built
            return refused
        key = archives.key(module, ref)
        if key is None:
            return f"subdirectory {module.subdir!r} does not exist at this tag"
        built = archives.get(key)
        if isinstance(built, str):
            return f"not published: {built}"
        notes.extend(f"{ref.name}: archive leaves out {line}" for line in built.skipped)
        published = Published(tv.version, tv.key, ref.commit_sha, ref.tree_sha)
        review = None
        if self._semver is not None:
            review = self._semver.review(mirror, repo, module, published, ref.name)
            if review.refused:
                if self._index.record_conflict(
                    module.id, tv.key, ref.name, "", ref.commit_sha, review.reason
                ):
                    log.warning("%s: %s", module.address, review.reason)
                return review.reason
        new = NewVersion(
            module_id=module.id,
            version=tv.version,
            version_key=tv.key,
            tag=ref.name,
            tag_sha=ref.tag_sha,
            commit_sha=ref.commit_sha,
            tree_sha=ref.tree_sha,
            archive_sha256=built.sha256,
            archive_size=built.size,
            archive_mtime=key.mtime,
            archive_builder=self.builds.builder,
            archive_subtree=key.tree_sha if key.subdir else "",
            archive_subdir=key.subdir,
        )
        allowed = review is not None and review.allowed
        attest = (
            self._attest.for_publish(
                module, repo, new, tv.key, dir_hash=built.dir_hash, allowed_breaking=allowed
            )
            if self._attest
            else contextlib.nullcontext()
        )
        version = f"{module.address} {tv.version}"
        with self._audit.recording("module.publish", version, detail=f"tag {ref.name}"), attest:
            inserted = self._index.publish_version(new)
        if not inserted:
            # Another process published this version between our check and insert.
            return self._publish_one(repo, module, tv, ref, notes, archives)
        log.info("published %s %s from %s (%s)", module.address, tv.version, ref.name, built.sha256)
        metrics.published("module", str(module.address))
        if self._docs is not None:
            self._docs.document(mirror, repo, module, published, search=False)
        if review is not None and self._semver is not None:
            self._semver.published(review)
            if review.report:
                return f"published: {review.report}"
        return "published"


@dataclass
class ModulePlan:
    """One module's tags this sync: the versions they map to, oldest first, and
    the tags that map to none (with why)."""

    module: ModuleRecord
    candidates: list[tuple[TagVersion, TagRef]]
    ignored: list[str]


def _plan(module: ModuleRecord, tags: list[TagRef], problems: list[TagProblem]) -> ModulePlan:
    ignored = [f"{p.name}: {p.reason}" for p in problems]
    candidates: list[tuple[TagVersion, TagRef]] = []
    others = 0
    for ref in tags:
        if not ref.name.startswith(module.tag_prefix):
            # Another module's tag in a monorepo: counted, not listed one by one (with
            # 50 modules x 100 tags that would be 245,000 lines a sync).
            others += 1
            continue
        try:
            candidates.append((version_from_tag(ref.name, module.tag_prefix), ref))
        except NotAVersion as exc:
            ignored.append(f"{ref.name}: {exc}")
    if others:
        ignored.append(f"{others} tags do not start with the module's tag prefix")
    # Oldest version first; for one version, `1.0.0` before `v1.0.0`, so which
    # tag spelling wins a tie is stable across syncs.
    candidates.sort(key=lambda c: (sort_key(c[0].key), c[1].name))
    return ModulePlan(module, candidates, ignored)


class _Archives:
    """The archives one sync needs: found in the index, or built, once each.

    `prepare` finds, before anything is published, every archive that the new
    versions of all modules need and that does not exist yet, and builds them
    together (gitreg/modules/builds.py: on every core when there are several).
    An archive of a module's directory alone (archive_scope 'subdir') is keyed by
    that directory's tree: a tag that leaves the directory unchanged reuses it.
    """

    def __init__(
        self,
        index: ModuleIndex,
        blobs: BlobStore,
        builds: ArchiveBuilds,
        git: GitBackend,
        mirror: Path,
    ) -> None:
        self._index = index
        self._blobs = blobs
        self._builds = builds
        self._git = git
        self._mirror = mirror
        self._subtrees: dict[tuple[str, str], str | None] = {}
        self._ready: dict[tuple[str, str, int], Built | str] = {}
        self._published: dict[tuple[int, str], VersionRecord | None] = {}

    def prepare(
        self, plans: list[ModulePlan], refused: Callable[[ModuleRecord, TagVersion, TagRef], str]
    ) -> None:
        """`refused`: why a tag is still refused by the semver guard ("" if it
        is not); its archive is not built."""
        for plan in plans:
            for tv, _ in plan.candidates:
                found = self._index.version_by_key(plan.module.id, tv.key)
                self._published[(plan.module.id, tv.key)] = found
        new = [
            (plan.module, ref)
            for plan in plans
            for tv, ref in plan.candidates
            if self._published[(plan.module.id, tv.key)] is None
            and not refused(plan.module, tv, ref)
        ]
        wanted = {(ref.tree_sha, m.subdir) for m, ref in new if m.subdir}
        self._subtrees = self._git.subtrees(self._mirror, wanted) if wanted else {}
        needed: dict[tuple[str, str, int], ArchiveKey] = {}
        for module, ref in new:
            key = self.key(module, ref)
            if key is not None and _ident(key) not in needed and self._known(key) is None:
                needed[_ident(key)] = key
        for key, outcome in self._builds.build_many(self._mirror, list(needed.values())):
            self._ready[_ident(key)] = outcome
            _log_skipped(key, outcome)

    def existing(self, module: ModuleRecord, tv: TagVersion) -> VersionRecord | None:
        """The version `tv` as published: what `prepare` read, once (a second
        call, after a lost insert race, asks the index again)."""
        ident = (module.id, tv.key)
        if ident in self._published:
            return self._published.pop(ident)
        return self._index.version_by_key(module.id, tv.key)

    def key(self, module: ModuleRecord, ref: TagRef) -> ArchiveKey | None:
        """What `module`'s archive at `ref` is made of; None if its subdir is missing."""
        if not module.subdir:
            return ArchiveKey(ref.tree_sha, "", ref.commit_time)
        pair = (ref.tree_sha, module.subdir)
        if pair not in self._subtrees:
            self._subtrees[pair] = self._git_subtree(pair)
        subtree = self._subtrees[pair]
        if subtree is None:
            return None
        if module.archive_scope == "subdir":
            return ArchiveKey(subtree, module.subdir, ref.commit_time)
        return ArchiveKey(ref.tree_sha, "", ref.commit_time)

    def get(self, key: ArchiveKey) -> Built | str:
        """The archive for `key`: prepared, already stored, or built now."""
        ready = self._ready.get(_ident(key))
        if ready is not None:
            return ready
        known = self._known(key)
        if known is not None:
            return known
        try:
            built: Built | str = self._builds.build_one(self._mirror, key)
        except ArchiveTooLarge as exc:
            built = str(exc)
        self._ready[_ident(key)] = built
        _log_skipped(key, built)
        return built

    def _known(self, key: ArchiveKey) -> Built | None:
        if key.subdir:
            known = self._index.archive_for_subtree(key.tree_sha, key.subdir)
        else:
            known = self._index.archive_for_tree(key.tree_sha, key.mtime)
        if known is None or not self._blobs.exists(known[0]):
            return None
        return Built(known[0], known[1], ())

    def _git_subtree(self, pair: tuple[str, str]) -> str | None:
        return self._git.subtree(self._mirror, *pair)


def _log_skipped(key: ArchiveKey, built: Built | str) -> None:
    for line in built.skipped if isinstance(built, Built) else ():
        log.warning("archive of tree %s left out %s", key.tree_sha[:12], line)


def _ident(key: ArchiveKey) -> tuple[str, str, int]:
    # A directory archive is the same whatever the tag's time: the first tag's is kept.
    return (key.tree_sha, key.subdir, 0 if key.subdir else key.mtime)

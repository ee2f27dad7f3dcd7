"""The semver guard: what the publisher, the browse API, the UI and the
commands ask about breaking changes.

At publish (`review`, then `published` once the version is recorded), a new
version is compared with the previous release of its major line: the newest
listed release below it with the same major version. A breaking change there
is a semver violation in a minor or patch release. The repository's policy
(`gitreg repo add/set --semver-check`, default the `semver_check` setting)
decides: `off` compares nothing, `warn` publishes and labels the version,
`enforce` refuses it (reported as a conflict) unless `allow-breaking` let that
tag's commit through. Prereleases and 0.x versions are compared and labelled,
never refused. A version whose documents cannot be made is published unchecked
(logged): the guard never stops a publish on its own failure.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gitreg.addresses import parse_module_address
from gitreg.audit.service import UNRECORDED, AuditLog
from gitreg.catalog.documenter import Documenter, Published
from gitreg.catalog.extract import DOCS_FORMAT
from gitreg.catalog.store import CatalogIndex
from gitreg.errors import BadRequest, Conflict, GitError, GitregError, NotAVersion, NotFound
from gitreg.metrics import service as metrics
from gitreg.semver_guard.diff import Change, counts, diff
from gitreg.semver_guard.interface import Interface, Interfaces, interface_of
from gitreg.semver_guard.store import POLICIES, Check, Policy, SemverIndex
from gitreg.storage.protocols import ModuleIndex
from gitreg.storage.records import ModuleRecord, RepoRecord, VersionRecord
from gitreg.versions import Version, parse_tag_version, parse_version

log = logging.getLogger("gitreg.semver")

_SHOWN = 5  # breaking changes named in a one-line report; the rest are counted


@dataclass(frozen=True)
class Review:
    """What the guard decided for one tag: `check` is None when nothing was
    compared (policy off, or no document); `refused` with `reason` (a
    conflict line) under `enforce`; `report` is the job report's line for a
    labelled version ("" when there is nothing to say)."""

    check: Check | None
    refused: bool = False
    reason: str = ""
    report: str = ""
    version: VersionRecord | None = None  # as it will be recorded (a baseline for the next)

    @property
    def allowed(self) -> bool:
        """A breaking change an operator let publish (`allow-breaking`)."""
        return self.check is not None and self.check.status == "allowed"


@dataclass(frozen=True)
class VersionChanges:
    """The diff of two versions, for the API and the UI."""

    module: str
    version: str
    base: str  # the version compared with; "" when there is none
    changes: list[Change]
    check: Check | None  # the stored verdict of `version` at publish, if any

    def as_json(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "version": self.version,
            "from": self.base or None,
            "counts": counts(self.changes),
            "changes": [c.as_json() for c in self.changes],
            "label": label(self.check),
            "status": self.check.status if self.check else None,
            "baseline": self.check.baseline if self.check else None,
        }


@dataclass(frozen=True)
class ChangesView:
    """What the UI's "Changes" page shows."""

    changes: VersionChanges
    versions: list[str]  # listed versions, newest first
    refused: list[Check]  # refused under `enforce`, not published, newest first


def label(check: Check | None) -> str:
    """What a version list shows beside a version ("" for nothing)."""
    if check is None or check.status not in ("breaking", "allowed", "refused"):
        return ""
    release = _release_kind(check.version, check.baseline)
    if check.exemption == "0.x":
        return f"breaking change in a 0.x {release} release (semver allows it before 1.0.0)"
    if check.exemption == "prerelease":
        return "breaking change in a prerelease"
    text = f"breaking change in a {release} release"
    if check.status == "allowed":
        return f"{text} (allowed by {check.allowed_by})"
    if check.status == "refused":
        return f"refused: {text}"
    return text


def _release_kind(version: str, baseline: str) -> str:
    try:
        v, b = parse_version(version), parse_version(baseline)
    except NotAVersion:
        return "minor/patch"
    return "patch" if (v.major, v.minor) == (b.major, b.minor) else "minor"


@dataclass
class _Sync:
    """What one thread's sync has read from the index and the store (each once)
    and the checks it will store: valid until its `flush`."""

    checks: list[Check] = field(default_factory=list)
    policies: dict[int, Policy] = field(default_factory=dict)
    versions: dict[int, list[VersionRecord]] = field(default_factory=dict)
    stored: dict[int, dict[str, Check]] = field(default_factory=dict)


class SemverGuard:
    def __init__(
        self,
        *,
        store: SemverIndex,
        index: ModuleIndex,
        catalog: CatalogIndex,
        docs: Documenter,
        default_policy: str,
        sync: Callable[[RepoRecord], str],
        audit: AuditLog = UNRECORDED,
    ) -> None:
        self._audit = audit  # who let a refused version publish
        self._store = store
        self._index = index
        self._catalog = catalog
        self._docs = docs
        self._default = _policy(default_policy)
        self._sync = sync  # publishes a repository's tags now; its summary
        self._interfaces = Interfaces()
        self._syncs = threading.local()  # each publishing thread's _Sync

    # -- policy -----------------------------------------------------------

    def policy(self, repo: RepoRecord) -> Policy:
        return self._store.policy(repo.id) or self._default

    def set_policy(self, target: str, policy: str) -> str:
        """`repo add/set --semver-check POLICY` ("default": the setting's) for
        the repository TARGET names: its URL or a module address it feeds."""
        chosen = None if policy == "default" else _policy(policy)
        module = None
        if target.count("/") == 2 and ":" not in target and not target.startswith("/"):
            addr = parse_module_address(target)
            module = self._index.find_module(addr.namespace, addr.name, addr.system)
        if module is not None:
            repo = self._index.repo(module.repo_id)
        else:
            repo = self._index.repo_by_url(target)  # NotFound when there is none
        self._store.set_policy(repo.id, chosen)
        shown = chosen or f"{self._default} (the semver_check setting)"
        return f"semver check for {repo.url}: {shown}"

    # -- publishing -------------------------------------------------------

    def review(
        self, mirror: Path, repo: RepoRecord, module: ModuleRecord, new: Published, tag: str
    ) -> Review:
        """Compare the tag's version with the previous release of its major line,
        before it is recorded. A refused version's check is stored here."""
        sync = self._sync_state()
        policy = sync.policies.get(repo.id) or sync.policies.setdefault(repo.id, self.policy(repo))
        if policy == "off":
            return Review(None)
        version = parse_version(new.version)
        baseline = _baseline(self._versions(module.id), version)
        check = Check(
            module.id, new.version_key, new.version, tag, new.commit_sha, "", "first", "", 0, "[]"
        )
        recorded = VersionRecord(
            module.id, new.version, tag, "", new.commit_sha, new.tree_sha, "", 0, "", False
        )
        if baseline is None:
            return Review(check, version=recorded)
        try:
            before = self._published_interface(mirror, repo, module, baseline)
            text = self._docs.build_json(mirror, repo, module, new)
            after = self._interfaces.of(
                text, new.commit_sha, (module.id, new.version_key, new.commit_sha)
            )
        except (GitError, GitregError, OSError, KeyError, ValueError) as exc:
            log.warning(
                "%s %s: not compared with %s: %s",
                module.address,
                new.version,
                baseline.version,
                exc,
            )
            return Review(None)
        # Consecutive tags mostly leave the interface's files alone: one content, no diff.
        changes = [] if before[0] == after[0] else diff(before[1], after[1])
        breaking = [c for c in changes if c.kind == "breaking"]
        check = Check(
            module.id,
            new.version_key,
            new.version,
            tag,
            new.commit_sha,
            baseline.version,
            "breaking" if breaking else "compatible",
            "",
            len(breaking),
            json.dumps([c.as_json() for c in changes]),
        )
        if not breaking:
            return Review(check, version=recorded)
        exemption = _exemption(version, policy)
        what = self._what(module, check, breaking)
        if exemption:
            labelled = replace(check, exemption=exemption)
            report = f"{module.address} {new.version}: {what}"
            return Review(labelled, report=report, version=recorded)
        earlier = self._stored(module.id).get(new.version_key)
        if earlier is not None and earlier.allowed_by and earlier.commit_sha == new.commit_sha:
            allowed = replace(check, status="allowed", allowed_by=earlier.allowed_by)
            report = f"{module.address} {new.version}: {what} (allowed by {earlier.allowed_by})"
            return Review(allowed, report=report, version=recorded)
        refused = replace(check, status="refused")
        self._store.put_check(refused)
        self._stored(module.id)[new.version_key] = refused
        if earlier is None or earlier.status != "refused" or earlier.commit_sha != new.commit_sha:
            metrics.semver_breaking("refused")
        return Review(refused, refused=True, reason=self._refusal(module, refused, breaking))

    def still_refused(self, module: ModuleRecord, version_key: str, commit_sha: str) -> str:
        """The conflict line of a version refused at `commit_sha` by an earlier
        sync, when it still is (its repository's policy is still `enforce` and
        nobody allowed it); "" otherwise, and the tag is reviewed afresh."""
        check = self._stored(module.id).get(version_key)
        if check is None or check.status != "refused" or check.commit_sha != commit_sha:
            return ""
        if check.allowed_by or self.policy(self._index.repo(module.repo_id)) != "enforce":
            return ""
        changes = [Change(**c) for c in json.loads(check.changes)]
        breaking = [c for c in changes if c.kind == "breaking"]
        return self._refusal(module, check, breaking)

    def _refusal(self, module: ModuleRecord, check: Check, breaking: list[Change]) -> str:
        return (
            f"conflict: tag {check.tag} is a {self._what(module, check, breaking)}; not"
            " published (semver_check enforce): tag the next major version, or"
            f" `gitreg modules allow-breaking {module.address} {check.version}`"
        )

    def published(self, review: Review) -> None:
        """The reviewed version is recorded: its check is stored by the
        publishing thread's next `flush` (at the end of the module's sync), or
        now when it replaces a refusal."""
        check = review.check
        if check is None:
            return
        if review.version is not None:
            self._versions(check.module_id).append(review.version)
        stored = self._stored(check.module_id)
        earlier = stored.get(check.version_key)
        stored[check.version_key] = check
        if earlier is not None and earlier.status == "refused":
            self._store.put_checks([check])
            self._store.forget_refusals(check.module_id, check.version_key)
        else:
            self._sync_state().checks.append(check)
        if check.status in ("breaking", "allowed"):
            metrics.semver_breaking("allowed" if check.status == "allowed" else "labelled")
            log.warning("published %s", review.report)

    def flush(self) -> None:
        """Store the checks `published` kept for this thread, in one transaction
        (one commit per sync, not per version), and forget what the sync read.
        The publisher calls it at the start and the end of each module's sync.
        Checks lost to a crash before it are made again by `gitreg reindex`."""
        pending = self._sync_state().checks
        self._syncs.state = _Sync()
        if pending:
            self._store.put_checks(pending)

    def _sync_state(self) -> _Sync:
        if not hasattr(self._syncs, "state"):
            self._syncs.state = _Sync()
        found: _Sync = self._syncs.state
        return found

    def _versions(self, module_id: int) -> list[VersionRecord]:
        """The module's versions as the sync started, and those it published."""
        known = self._sync_state().versions
        if module_id not in known:
            known[module_id] = list(self._index.versions(module_id))
        return known[module_id]

    def _stored(self, module_id: int) -> dict[str, Check]:
        """The module's checks by version key, as this sync stored or found them."""
        known = self._sync_state().stored
        if module_id not in known:
            known[module_id] = {c.version_key: c for c in self._store.checks(module_id)}
        return known[module_id]

    def _what(self, module: ModuleRecord, check: Check, breaking: list[Change]) -> str:
        shown = "; ".join(c.detail for c in breaking[:_SHOWN])
        more = f"; and {len(breaking) - _SHOWN} more" if len(breaking) > _SHOWN else ""
        kind = _release_kind(check.version, check.baseline)
        return f"breaking change in a {kind} release against {check.baseline}: {shown}{more}"

    def _published_interface(
        self, mirror: Path, repo: RepoRecord, module: ModuleRecord, version: VersionRecord
    ) -> tuple[str, Interface]:
        """A published version's interface: reviewed earlier in this process,
        or from its stored document, or from one made again from the mirror
        when that is missing or older than DOCS_FORMAT (and while the sync that
        published it has not stored it yet)."""
        key = str(parse_version(version.version).without_build())
        found = self._interfaces.remembered((module.id, key, version.commit_sha))
        if found is not None:
            return found
        text = self._catalog.docs(module.id, key)
        if text is None or f'"format": {DOCS_FORMAT},' not in text:
            published = Published(version.version, key, version.commit_sha, version.tree_sha)
            text = self._docs.build_json(mirror, repo, module, published)
        return self._interfaces.of(text, version.commit_sha, (module.id, key, version.commit_sha))

    # -- reading ----------------------------------------------------------

    def checks(self, module_id: int) -> dict[str, Check]:
        """A module's checks by version key."""
        return {c.version_key: c for c in self._store.checks(module_id)}

    def labelled(self, module_id: int) -> dict[str, dict[str, Any]]:
        """For the browse API and the UI: each published version of a module
        with a breaking change in a minor/patch release, by version: its
        label, status, baseline and breaking changes."""
        found: dict[str, dict[str, Any]] = {}
        for check in self._store.checks(module_id):
            if check.status in ("breaking", "allowed"):
                changes = json.loads(check.changes)
                found[check.version] = {
                    "label": label(check),
                    "status": check.status,
                    "baseline": check.baseline,
                    "breaking": [c["detail"] for c in changes if c["kind"] == "breaking"],
                }
        return found

    def labels(self, module_id: int) -> dict[str, str]:
        """The versions of a module a version list marks, with their label."""
        return {c.version: label(c) for c in self._store.checks(module_id) if label(c)}

    def changes(
        self, names: tuple[str, str, str], version: str, base: str | None
    ) -> VersionChanges:
        """The classified diff of `version` against `base` (default: the previous
        release of any major line; a refused version's stored diff when it is
        not published). Raises NotFound or BadRequest. Access is the caller's check."""
        address = parse_module_address("/".join(names))
        module = self._index.find_module(address.namespace, address.name, address.system)
        where = f"module {'/'.join(names)}"
        if module is None:
            raise NotFound(f"{where} not found")
        versions = self._index.versions(module.id)
        target = _exact(versions, version)
        checks = self.checks(module.id)
        if target is None:
            refused = checks.get(_key(version))
            if (
                refused is not None
                and refused.status == "refused"
                and base in (None, refused.baseline)
            ):
                changes = [Change(**c) for c in json.loads(refused.changes)]
                return VersionChanges(
                    module.address, refused.version, refused.baseline, changes, refused
                )
            raise NotFound(f"{where} {version} not found")
        check = checks.get(_key(target.version))
        if base is None:
            older = [
                v
                for v in versions
                if not v.yanked and parse_version(v.version) < parse_version(target.version)
            ]
            chosen = max(older, key=lambda v: parse_version(v.version), default=None)
        else:
            chosen = _exact(versions, base)
            if chosen is None:
                raise NotFound(f"{where} {base} not found")
        if chosen is None:
            return VersionChanges(module.address, target.version, "", [], check)
        before, after = self._document(module, chosen), self._document(module, target)
        return VersionChanges(
            module.address,
            target.version,
            chosen.version,
            diff(interface_of(before), interface_of(after)),
            check,
        )

    def changes_view(
        self, names: tuple[str, str, str], version: str | None, base: str | None
    ) -> ChangesView:
        """The UI's "Changes" page: `changes` (of the latest version when
        `version` is None), the versions to pick from, and the refused ones."""
        address = parse_module_address("/".join(names))
        module = self._index.find_module(address.namespace, address.name, address.system)
        if module is None:
            raise NotFound(f"module {'/'.join(names)} not found")
        listed = sorted(
            (v for v in self._index.versions(module.id) if not v.yanked),
            key=lambda v: parse_version(v.version),
            reverse=True,
        )
        if version is None:
            if not listed:
                raise NotFound(f"module {module.address} has no listed version")
            version = listed[0].version
        refused = [c for c in self._store.checks(module.id) if c.status == "refused"]
        return ChangesView(
            self.changes(names, version, base),
            [v.version for v in listed],
            sorted(refused, key=lambda c: parse_version(c.version), reverse=True),
        )

    def _document(self, module: ModuleRecord, version: VersionRecord) -> dict[str, Any]:
        stored = self._catalog.docs(module.id, _key(version.version))
        if stored is None:
            raise NotFound(
                f"module {module.address} {version.version} has no document yet"
                " (run `gitreg reindex`)"
            )
        found = json.loads(stored)
        return found if isinstance(found, dict) else {}

    # -- operators --------------------------------------------------------

    def allow_breaking(self, address: str, version: str, by: str) -> str:
        """Let one refused version publish (its tag at the commit that was
        refused), and sync its repository now; what happened, for the CLI."""
        addr = parse_module_address(address)
        module = self._index.find_module(addr.namespace, addr.name, addr.system)
        if module is None:
            raise NotFound(f"module {address} not found")
        key = _key(version)
        found = self._store.check(module.id, key)
        allowed = False
        if found is not None and found.status == "refused":
            with self._audit.recording(
                "module.allow_breaking", f"{module.address} {version}", detail=f"by {by}"
            ):
                allowed = self._store.allow(module.id, key, by)
        if not allowed:
            found = self._store.check(module.id, key)
            state = f"its check says {found.status}" if found else "it was never refused"
            raise Conflict(f"module {module.address} {version} is not a refused version ({state})")
        log.warning("%s %s: breaking change allowed by %s", module.address, version, by)
        repo = self._index.repo(module.repo_id)
        return self._sync(repo)

    def reindex(self, progress: Any) -> tuple[int, int]:
        """Check published versions that have no check yet (published before the
        guard), as labels only: nothing published is ever withdrawn. Modules
        of repositories whose policy is `off` are left alone. Returns
        (checked, failed); a failed one is tried again by the next run."""
        done = self._store.checked_keys()
        todo: list[tuple[ModuleRecord, VersionRecord]] = []
        for module in self._index.modules():
            if self.policy(self._index.repo(module.repo_id)) == "off":
                continue
            for v in self._index.versions(module.id):
                if (module.id, _key(v.version)) not in done:
                    todo.append((module, v))
        progress.begin(len(todo))
        failed = 0
        for i, (module, v) in enumerate(todo, 1):
            ok = self._check_published(module, v)
            failed += not ok
            progress.step(i, f"semver {module.address} {v.version}", ok)
        return len(todo) - failed, failed

    def _check_published(self, module: ModuleRecord, v: VersionRecord) -> bool:
        version = parse_version(v.version)
        key = _key(v.version)
        baseline = _baseline(self._index.versions(module.id), version)
        if baseline is None:
            self._store.put_check(
                Check(module.id, key, v.version, v.tag, v.commit_sha, "", "first", "", 0, "[]")
            )
            return True
        try:
            before, after = self._document(module, baseline), self._document(module, v)
        except NotFound as exc:
            log.warning("%s", exc)
            return False
        if before.get("format") != DOCS_FORMAT or after.get("format") != DOCS_FORMAT:
            return False
        changes = diff(interface_of(before), interface_of(after))
        breaking = sum(c.kind == "breaking" for c in changes)
        exemption = "" if not breaking else (_exemption(version, "warn") or "warn")
        self._store.put_check(
            Check(
                module.id,
                key,
                v.version,
                v.tag,
                v.commit_sha,
                baseline.version,
                "breaking" if breaking else "compatible",
                exemption,
                breaking,
                json.dumps([c.as_json() for c in changes]),
            )
        )
        return True


def _policy(text: str) -> Policy:
    for policy in POLICIES:
        if text == policy:
            return policy
    raise BadRequest(f"semver check must be one of {', '.join(POLICIES)}, got {text[:40]!r}")


def _exemption(version: Version, policy: Policy) -> str:
    """Why a breaking version is published anyway ("" under enforce: it is not)."""
    if version.is_prerelease:
        return "prerelease"
    if version.major == 0:
        return "0.x"
    return "warn" if policy == "warn" else ""


def _baseline(versions: list[VersionRecord], version: Version) -> VersionRecord | None:
    """The previous release of `version`'s major line: the newest listed
    (not yanked) release below it with the same major version."""
    below = [
        (parsed, v)
        for v in versions
        if not v.yanked
        and not (parsed := parse_version(v.version)).is_prerelease
        and parsed.major == version.major
        and parsed < version
    ]
    return max(below, key=lambda pair: pair[0])[1] if below else None


def _exact(versions: list[VersionRecord], text: str) -> VersionRecord | None:
    try:
        wanted = parse_tag_version(text)
    except NotAVersion as exc:
        raise BadRequest(str(exc)) from exc
    key = wanted.without_build()
    return next((v for v in versions if parse_version(v.version).without_build() == key), None)


def _key(version: str) -> str:
    try:
        return str(parse_tag_version(version).without_build())
    except NotAVersion as exc:
        raise BadRequest(str(exc)) from exc

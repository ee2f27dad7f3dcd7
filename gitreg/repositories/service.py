"""Registering, changing, removing, listing and syncing the repositories gitreg
publishes from, and what a webhook delivery asks of them.

`Repositories.add` is the one path `gitreg repo add` (modules and providers)
and webhook auto-registration share: it validates the remote against the URL
policy and writes the repository with the module or provider it feeds in ONE
transaction (`RegistrationIndex.register`), so a refused link leaves nothing.
"""

from __future__ import annotations

import logging
import re
import secrets
import shutil
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Generic, TypeVar

from gitreg.addresses import (
    check_subdir,
    module_address,
    parse_local_provider_address,
    parse_module_address,
)
from gitreg.audit.actor import SYSTEM, Actor
from gitreg.audit.service import UNRECORDED, AuditLog
from gitreg.auth.tokens import Principal, Scope
from gitreg.errors import BadRequest, ConfigError, Forbidden, NotFound, Unauthorized
from gitreg.git.remotes import forge_name_from_url, normalise_remote
from gitreg.jobs.queue import JobQueue
from gitreg.jobs.store import Enqueued, Submission
from gitreg.modules.globs import check_module_glob, check_tag_pattern
from gitreg.modules.publisher import Publisher, SyncResult
from gitreg.providers.forges import default_forge, forge_config
from gitreg.providers.store import ProviderIndex
from gitreg.repositories.store import (
    ModuleGlobLink,
    ModuleLink,
    ProviderLink,
    RegistrationIndex,
    RepoRow,
)
from gitreg.secret_refs import resolve_secret
from gitreg.settings import Settings
from gitreg.storage.protocols import ModuleIndex, SecretStore
from gitreg.storage.records import ConflictRecord, ModuleRecord, RepoRecord, VersionRecord
from gitreg.versions import sort_key, unsafe_ref_reason

# What it logs is about webhook deliveries; operators find it under that name.
log = logging.getLogger("gitreg.webhooks")

L = TypeVar("L", ModuleLink, ProviderLink, ModuleGlobLink)
# The public registry's naming convention for module repositories.
_CONVENTIONAL = re.compile(r"^terraform-(?P<system>[0-9A-Za-z]+)-(?P<name>[0-9A-Za-z_-]+)$")


@dataclass(frozen=True)
class RepoSource:
    url: str  # as the operator typed it; normalised by `Repositories.add`
    forge_repo: str = ""  # default: from the URL
    webhook_secret: str = ""


@dataclass(frozen=True)
class Registered(Generic[L]):
    """A registered repository and what it was registered to feed."""

    repo: RepoRecord
    link: L


@dataclass(frozen=True)
class RepoListing:
    """One line of `gitreg repo list`: a repository and the addresses it feeds."""

    repo: RepoRecord
    modules: list[str]
    providers: list[str]


@dataclass(frozen=True)
class ModuleListing:
    """One module of `gitreg modules`: where it comes from and what it published."""

    module: ModuleRecord
    repo: RepoRecord
    versions: list[VersionRecord]  # in version order, yanked ones included
    conflicts: list[ConflictRecord]


def module_link(address: str, subdir: str, tag_prefix: str) -> ModuleLink:
    """`repo add --module NAMESPACE/NAME/SYSTEM`, checked; raises `BadRequest`."""
    parsed = parse_module_address(address)
    return ModuleLink(
        parsed.namespace, parsed.name, parsed.system, check_subdir(subdir), check_prefix(tag_prefix)
    )


def module_glob_link(
    pattern: str, namespace: str, system: str, tag_pattern: str, whole_tree: bool
) -> ModuleGlobLink:
    """`repo add --modules PATTERN`: checked like `--module` addresses, with the
    directory name as each module's NAME (docs/modules.md "Monorepos")."""
    if not namespace or not system:
        raise BadRequest(
            "--modules needs --namespace and --system (e.g. --namespace acme --system aws)"
        )
    address = parse_module_address(f"{namespace}/x/{system}")
    return ModuleGlobLink(
        check_module_glob(pattern),
        address.namespace,
        address.system,
        check_tag_pattern(tag_pattern),
        "repository" if whole_tree else "subdir",
    )


def check_prefix(tag_prefix: str) -> str:
    if tag_prefix and (reason := unsafe_ref_reason(tag_prefix)):
        raise BadRequest(f"invalid tag prefix {tag_prefix!r}: {reason}")
    return tag_prefix


@dataclass(frozen=True)
class _Target:
    """What `repo remove|set TARGET` names: a repository, and the module if
    TARGET was a module address (None for a URL or a provider address)."""

    repo: RepoRecord
    module: ModuleRecord | None
    feed: str  # how TARGET reads in messages


class Repositories:
    """The repositories gitreg publishes from: every command and webhook that
    registers, changes, lists or syncs one goes through here."""

    def __init__(
        self,
        *,
        settings: Settings,
        index: ModuleIndex,
        registrations: RegistrationIndex,
        providers: ProviderIndex,
        secrets: SecretStore,
        publisher: Publisher,
        jobs: JobQueue,
        audit: AuditLog = UNRECORDED,
    ) -> None:
        self._audit = audit
        self._settings = settings
        self._index = index
        self._registrations = registrations
        self._providers = providers
        self._secrets = secrets
        self._publisher = publisher
        self._jobs = jobs

    # -- registering -------------------------------------------------------------

    def add(self, source: RepoSource, link: L, *, fetch_first: bool) -> Registered[L]:
        """Register a repository and what it feeds; raises, writing nothing, on bad input.

        With `fetch_first` the remote is fetched into a staging mirror BEFORE the
        registration is committed, so a wrong, unreachable or non-git URL fails
        (`GitError`) with nothing written (no rows, no mirror) and there is
        nothing to roll back; no version can exist yet, so no published version
        is ever at stake. The staged mirror becomes the repository's mirror
        after the commit. `Conflict` when the address is fed by another
        repository.
        """
        remote = self._check_remote(source.url)
        # Sealed with the operator's key when one is configured.
        secret = self._secrets.seal_webhook_secret(source.webhook_secret)
        row = RepoRow(remote, source.forge_repo or forge_name_from_url(remote), secret)
        staged = self._publisher.fetch_staged(remote) if fetch_first else None
        try:
            with self._audit.recording("repository.add", remote, detail=str(link)[:200]):
                repo_id = self._registrations.register(row, link)
        except BaseException:
            if staged is not None:
                shutil.rmtree(staged, ignore_errors=True)
            raise
        repo = self._index.repo(repo_id)
        if staged is not None:
            self._publisher.adopt_staged(staged, repo)
        return Registered(repo, link)

    def add_provider(
        self, source: RepoSource, address: str, forge: str, sign: bool
    ) -> Registered[ProviderLink]:
        """`repo add URL --provider NAMESPACE/TYPE`: a repository whose forge
        releases feed a provider. `forge` "" means the forge whose hosts include
        the URL's; an unknown forge is refused now (`NotFound`), not at the
        first job (a bad `[forges.NAME]` table stopped the settings' load).
        Nothing is fetched: the first sync reads the releases."""
        parsed = parse_local_provider_address(address)
        self._check_remote(source.url)  # a refused URL is reported before the forge question
        forge = forge or default_forge(self._settings, source.url)
        if not forge:
            raise BadRequest(
                "cannot tell which forge hosts this repository's releases; pass --forge NAME"
                " (github, gitlab, or a [forges.NAME] table of the config file)"
            )
        forge_config(self._settings, forge)
        link = ProviderLink(parsed.namespace, parsed.type, forge, sign)
        return self.add(source, link, fetch_first=False)

    def remove(self, target: str, keep_versions: bool) -> str:
        """Unregister a repository (TARGET as `change` takes it); refuses
        (`BadRequest`) while it has published versions unless `keep_versions`,
        which keeps them serving, and when TARGET names one of several things
        the repository feeds. Returns what happened, for the operator."""
        found = self._resolve(target)
        repo = found.repo
        others = [f for f in self._feeds(repo) if f.lower() != found.feed.lower()]
        if found.feed != repo.url and others:
            raise BadRequest(
                f"{repo.url} also feeds {', '.join(others)}; remove the repository by its URL"
                f" (gitreg repo remove {repo.url}) to unregister all of them"
            )
        with self._audit.recording("repository.remove", found.feed):
            gone = self._registrations.remove(repo.id, keep_versions)
        self._publisher.drop_mirror(repo)
        if gone:
            return f"removed {repo.url}"
        return f"removed {repo.url}; its published versions keep serving"

    def change(
        self, target: str, remote: str | None, subdir: str | None, tag_prefix: str | None
    ) -> str:
        """Change a repository's remote and/or a module's subdir and tag prefix;
        the next sync uses them. TARGET is a repository URL as `listing` shows
        it, a module address NAMESPACE/NAME/SYSTEM or a provider address
        NAMESPACE/TYPE (`NotFound` otherwise). A new remote must answer
        (`GitError`) before anything changes. Published versions are immutable
        and stay as they are. Returns what happened, for the operator."""
        if remote is None and subdir is None and tag_prefix is None:
            raise BadRequest("nothing to change: pass --remote, --subdir or --tag-prefix")
        found = self._resolve(target)
        module = found.module
        if module is None and (subdir is not None or tag_prefix is not None):
            modules = self._index.modules_of_repo(found.repo.id)
            if len(modules) != 1:
                raise BadRequest(
                    f"{found.feed} does not name one module; name it as NAMESPACE/NAME/SYSTEM"
                )
            module = modules[0]
        url = self._check_remote(remote) if remote is not None else None
        staged = self._publisher.fetch_staged(url) if url and url != found.repo.url else None
        try:
            with self._audit.recording("repository.change", found.feed):
                self._registrations.change(
                    found.repo.id,
                    url,
                    module.id if module else None,
                    check_subdir(subdir)
                    if subdir is not None
                    else (module.subdir if module else ""),
                    check_prefix(tag_prefix)
                    if tag_prefix is not None
                    else (module.tag_prefix if module else ""),
                )
        except BaseException:
            if staged is not None:
                shutil.rmtree(staged, ignore_errors=True)
            raise
        if staged is not None:
            # The old remote's tags must not be published as the new one's.
            self._publisher.drop_mirror(found.repo)
            self._publisher.adopt_staged(staged, found.repo)
        return f"changed {found.feed}"

    # -- reading -----------------------------------------------------------------

    def repos(self) -> list[RepoRecord]:
        """Registered (not removed) repositories, in id order."""
        return self._index.repos()

    def repo(self, repo_id: int) -> RepoRecord:
        """One repository by id, removed ones included; `NotFound` when there is none."""
        return self._index.repo(repo_id)

    def listing(self) -> list[RepoListing]:
        """Every registered repository with the modules and providers it feeds."""
        return [
            RepoListing(
                repo,
                [m.address for m in self._index.modules_of_repo(repo.id)],
                [p.address for p in self._providers.providers_of_repo(repo.id)],
            )
            for repo in self._index.repos()
        ]

    def module_listing(self) -> list[ModuleListing]:
        """Every registered module with its repository, versions and conflicts."""
        found = []
        for module in self._index.modules():
            versions = sorted(self._index.versions(module.id), key=lambda v: sort_key(v.version))
            found.append(
                ModuleListing(
                    module,
                    self._index.repo(module.repo_id),
                    versions,
                    self._index.conflicts(module.id),
                )
            )
        return found

    # -- syncing -----------------------------------------------------------------

    def to_sync(self, address: str | None) -> list[RepoRecord]:
        """The repositories `gitreg sync [NAMESPACE/NAME/SYSTEM]` syncs: every
        registered one, or the one feeding that module (`NotFound` when it is
        not registered or its repository was removed)."""
        if not address:
            return self._index.repos()
        parsed = parse_module_address(address)
        module = self._index.find_module(parsed.namespace, parsed.name, parsed.system)
        if module is None:
            raise NotFound(f"module {parsed} is not registered")
        repo = self._index.repo(module.repo_id)
        if repo.removed_at is not None:
            raise NotFound(f"module {parsed}'s repository was removed; its versions are kept")
        return [repo]

    def sync_modules(self, repo: RepoRecord) -> SyncResult:
        """Fetch the repository and publish its modules' new tags; blocking.
        Raises `GitError` when the remote cannot be fetched."""
        return self._publisher.sync_repo(repo)

    # -- webhook deliveries ------------------------------------------------------

    def verified_repos(
        self, name: str | None, verify: Callable[[str], bool], forge: str
    ) -> list[RepoRecord]:
        """The registered repositories named `name` on the forge whose webhook
        secret the delivery proves (`verify(secret)`: the forge's constant-time
        signature or token check over the raw body); [] when it proves the
        global webhook secret but names no registered repository.

        Short of that proof, every refusal that could depend on the name is the
        same `Unauthorized` as a wrong signature, so no answer tells which names
        are registered; why it was refused goes to the log. A delivery that
        names nothing while no secret is configured at all is refused as such.
        """
        repos = self._index.repos_by_forge_name(name) if name else []
        if name and repos:
            keys = [self._secret(r) for r in repos]
            verified = [r for r, key in zip(repos, keys, strict=True) if _proves(verify, key)]
            if verified:
                return verified
            if not any(keys):
                log.warning(
                    "%s delivery refused: no webhook secret is configured for %r"
                    " (gitreg repo add --webhook-secret, or webhook_secret)",
                    forge,
                    name[:200],
                )
            raise _wrong_signature(forge)
        default = resolve_secret(self._settings.webhook_secret)
        if not default and not name:
            raise Unauthorized("no webhook secret is configured: refusing every delivery")
        if not _proves(verify, default):
            if name:
                log.info(
                    "%s delivery refused: repository %r is not registered with gitreg"
                    " (gitreg repo add URL --module NS/NAME/SYSTEM --forge-repo OWNER/REPO)%s",
                    forge,
                    name[:200],
                    ", and the delivery is not signed with webhook_secret" if default else "",
                )
            raise _wrong_signature(forge)
        return []

    def auto_register(self, name: str) -> RepoRecord:
        """Register `OWNER/terraform-SYSTEM-NAME` as module OWNER/NAME/SYSTEM when
        the operator allowed that owner (`auto_register_owners`; `NotFound`
        otherwise); the remote comes from the operator's template, never from
        the payload. Nothing is fetched: the sync job that follows fetches."""
        settings = self._settings
        owners = {o.strip().lower() for o in settings.auto_register_owners.split(",") if o.strip()}
        parts = name.split("/")
        match = _CONVENTIONAL.match(parts[-1]) if len(parts) == 2 else None
        if not owners or parts[0].lower() not in owners or match is None:
            raise NotFound(f"repository {name[:200]!r} is not registered with gitreg")
        address = module_address(parts[0], match["name"], match["system"].lower())
        source = RepoSource(settings.auto_register_remote.format(forge_repo=name), name)
        link = ModuleLink(address.namespace, address.name, address.system, "", "")
        repo = self.add(source, link, fetch_first=False).repo
        log.info("auto-registered %s as module %s from %s", name, address, repo.url)
        return repo

    def publishing_repos(self, name: str, principal: Principal) -> list[RepoRecord]:
        """The registered repositories named `name` on the forge, for a
        post-receive notification from `principal`: `NotFound` when there are
        none, `Forbidden` unless its token may publish in every namespace they
        publish into (their modules' and providers')."""
        repos = self._index.repos_by_forge_name(name)
        if not repos:
            raise NotFound(
                f"repository {name[:200]!r} is not registered with gitreg"
                " (set gitreg.repo in the hook's repository to its --forge-repo name)"
            )
        for repo in repos:
            refused = sorted(
                ns for ns in self._namespaces(repo) if not principal.allows(Scope.publish, ns)
            )
            if refused:
                raise Forbidden(f"this token may not publish in namespace {', '.join(refused)}")
        return repos

    def enqueue_syncs(
        self,
        repos: list[RepoRecord],
        source: str,
        reason: str,
        delivery_id: str,
        actor: Actor = SYSTEM,
    ) -> Future[list[Enqueued]]:
        """A sync job per repository, stored by the queue's group commit; the
        future resolves, one `Enqueued` per repository in order, once the
        transaction holding them committed, or raises `QueueUnavailable` /
        `StorageFull` (then nothing of it was stored). `actor` asked for them:
        the syncs' audit rows name them."""
        return self._jobs.submit_grouped(
            [Submission(repo.id, "sync", source, reason, delivery_id, actor) for repo in repos]
        )

    # -- helpers -----------------------------------------------------------------

    def _check_remote(self, url: str) -> str:
        settings = self._settings
        return normalise_remote(
            url, allow_local=settings.allow_local_remotes, allow_http=settings.allow_http_remotes
        )

    def _secret(self, repo: RepoRecord) -> str:
        """The repository's own webhook secret, else the global one."""
        return resolve_secret(self._opened(repo)) or resolve_secret(self._settings.webhook_secret)

    def _opened(self, repo: RepoRecord) -> str:
        """The repository's secret (reference), unsealed. One that cannot be opened
        (sealed by another key) refuses deliveries like an unreadable reference
        does: the reason is logged, never answered as a 500."""
        try:
            return self._secrets.open_webhook_secret(repo.webhook_secret)
        except ConfigError as exc:
            log.error("webhook secret of %s: %s", repo.url, exc)
            return ""

    def _namespaces(self, repo: RepoRecord) -> set[str]:
        """Every namespace a repository publishes into (its modules and providers)."""
        found = {m.namespace for m in self._index.modules_of_repo(repo.id)}
        found |= {p.namespace for p in self._providers.providers_of_repo(repo.id)}
        return found

    def _live_repo(self, repo_id: int | None, what: str) -> RepoRecord:
        repo = self._index.repo(repo_id) if repo_id is not None else None
        if repo is None or repo.removed_at is not None:
            raise NotFound(f"{what} is not fed by a registered repository")
        return repo

    def _resolve(self, target: str) -> _Target:
        """TARGET is a repository URL as `listing` shows it, a module address
        NAMESPACE/NAME/SYSTEM, or a provider address NAMESPACE/TYPE."""
        by_url = [r for r in self._index.repos() if r.url == target.strip()]
        if not by_url and "/" in target and ":" not in target and not target.startswith(("/", ".")):
            if target.count("/") == 2:
                address = parse_module_address(target)
                module = self._index.find_module(address.namespace, address.name, address.system)
                if module is None:
                    raise NotFound(f"module {address} is not registered")
                return _Target(
                    self._live_repo(module.repo_id, f"module {address}"), module, str(address)
                )
            provider = parse_local_provider_address(target)
            found = self._providers.find_provider(provider.key)
            if found is None:
                raise NotFound(f"provider {provider} is not registered")
            what = f"provider {provider}"
            return _Target(self._live_repo(found.repo_id, what), None, what)
        if not by_url:
            url = self._check_remote(target)
            by_url = [r for r in self._index.repos() if r.url == url]
        if not by_url:
            raise NotFound(f"repository {target[:200]!r} is not registered (see gitreg repo list)")
        return _Target(by_url[0], None, by_url[0].url)

    def _feeds(self, repo: RepoRecord) -> list[str]:
        modules = [m.address for m in self._index.modules_of_repo(repo.id)]
        providers = [f"provider {p.address}" for p in self._providers.providers_of_repo(repo.id)]
        return modules + providers


def _proves(verify: Callable[[str], bool], secret: str) -> bool:
    """Whether the delivery carries the proof of `secret`. Without a secret the
    check still runs, against one nobody knows: it fails either way, and costs
    what the check of a real secret does, so its time does not tell either."""
    return verify(secret or secrets.token_hex(32))


def _wrong_signature(forge: str) -> Unauthorized:
    return Unauthorized(f"{forge} signature or token does not match")

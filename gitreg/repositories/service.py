"""Registering, changing and removing the repositories gitreg publishes from.

`register_repo` is the one path `gitreg repo add` (modules and providers) and
webhook auto-registration share: it validates the remote against the URL
policy and writes the repository with the module or provider it feeds in ONE
transaction (storage/registration.py), so a refused link leaves nothing.
It stays at the top level because module and provider repositories share it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from gitreg.addresses import check_subdir, parse_local_provider_address, parse_module_address
from gitreg.errors import BadRequest, NotFound
from gitreg.git.remotes import forge_name_from_url, normalise_remote
from gitreg.modules.globs import check_module_glob, check_tag_pattern
from gitreg.repositories.store import ModuleGlobLink, ModuleLink, ProviderLink, RepoRow
from gitreg.services import Services
from gitreg.settings import Settings
from gitreg.storage.records import ModuleRecord, RepoRecord
from gitreg.versions import unsafe_ref_reason


@dataclass(frozen=True)
class RepoSource:
    url: str  # as the operator typed it; normalised by register_repo
    forge_repo: str = ""  # default: from the URL
    webhook_secret: str = ""


def check_remote(settings: Settings, url: str) -> str:
    return normalise_remote(
        url, allow_local=settings.allow_local_remotes, allow_http=settings.allow_http_remotes
    )


def module_link(address: str, subdir: str, tag_prefix: str) -> ModuleLink:
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


def register_repo(
    svc: Services,
    source: RepoSource,
    link: ModuleLink | ProviderLink | ModuleGlobLink,
    fetch_first: bool,
) -> RepoRecord:
    """Register a repository and what it feeds; raises, writing nothing, on bad input.

    With `fetch_first` the remote is fetched into a staging mirror BEFORE the
    registration is committed, so a wrong, unreachable or non-git URL fails
    with nothing written (no rows, no mirror) and there is nothing to roll
    back; no version can exist yet, so no published version is ever at stake.
    The staged mirror becomes the repository's mirror after the commit.
    """
    remote = check_remote(svc.settings, source.url)
    # Sealed with the operator's key when one is configured (issue 12).
    secret = svc.secrets.seal_webhook_secret(source.webhook_secret)
    row = RepoRow(remote, source.forge_repo or forge_name_from_url(remote), secret)
    staged = svc.publisher.fetch_staged(remote) if fetch_first else None
    try:
        repo_id = svc.registrations.register(row, link)
    except BaseException:
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)
        raise
    repo = svc.index.repo(repo_id)
    if staged is not None:
        svc.publisher.adopt_staged(staged, repo)
    return repo


@dataclass(frozen=True)
class Target:
    """What `repo remove|set TARGET` names: a repository, and the module if
    TARGET was a module address (None for a URL or a provider address)."""

    repo: RepoRecord
    module: ModuleRecord | None
    feed: str  # how TARGET reads in messages


def _live_repo(svc: Services, repo_id: int | None, what: str) -> RepoRecord:
    repo = svc.index.repo(repo_id) if repo_id is not None else None
    if repo is None or repo.removed_at is not None:
        raise NotFound(f"{what} is not fed by a registered repository")
    return repo


def resolve_target(svc: Services, target: str) -> Target:
    """TARGET is a repository URL as `gitreg repo list` shows it, a module
    address NAMESPACE/NAME/SYSTEM, or a provider address NAMESPACE/TYPE."""
    by_url = [r for r in svc.index.repos() if r.url == target.strip()]
    if not by_url and "/" in target and ":" not in target and not target.startswith(("/", ".")):
        if target.count("/") == 2:
            address = parse_module_address(target)
            module = svc.index.find_module(address.namespace, address.name, address.system)
            if module is None:
                raise NotFound(f"module {address} is not registered")
            return Target(
                _live_repo(svc, module.repo_id, f"module {address}"), module, str(address)
            )
        provider = parse_local_provider_address(target)
        found = svc.providers.store.find_provider(provider.key)
        if found is None:
            raise NotFound(f"provider {provider} is not registered")
        what = f"provider {provider}"
        return Target(_live_repo(svc, found.repo_id, what), None, what)
    if not by_url:
        url = check_remote(svc.settings, target)
        by_url = [r for r in svc.index.repos() if r.url == url]
    if not by_url:
        raise NotFound(f"repository {target[:200]!r} is not registered (see gitreg repo list)")
    return Target(by_url[0], None, by_url[0].url)


def _feeds(svc: Services, repo: RepoRecord) -> list[str]:
    modules = [m.address for m in svc.index.modules_of_repo(repo.id)]
    providers = [f"provider {p.address}" for p in svc.providers.store.providers_of_repo(repo.id)]
    return modules + providers


def remove_repo(svc: Services, target: str, keep_versions: bool) -> str:
    """Unregister a repository; refuses while it has published versions unless
    `keep_versions`, which keeps them serving. Returns what happened."""
    found = resolve_target(svc, target)
    repo = found.repo
    others = [f for f in _feeds(svc, repo) if f.lower() != found.feed.lower()]
    if found.feed != repo.url and others:
        raise BadRequest(
            f"{repo.url} also feeds {', '.join(others)}; remove the repository by its URL"
            f" (gitreg repo remove {repo.url}) to unregister all of them"
        )
    gone = svc.registrations.remove(repo.id, keep_versions)
    svc.publisher.drop_mirror(repo)
    if gone:
        return f"removed {repo.url}"
    return f"removed {repo.url}; its published versions keep serving"


def set_repo(
    svc: Services, target: str, remote: str | None, subdir: str | None, tag_prefix: str | None
) -> str:
    """Change a repository's remote and/or a module's subdir and tag prefix; the
    next sync uses them. Published versions are immutable and stay as they are."""
    if remote is None and subdir is None and tag_prefix is None:
        raise BadRequest("nothing to change: pass --remote, --subdir or --tag-prefix")
    found = resolve_target(svc, target)
    module = found.module
    if module is None and (subdir is not None or tag_prefix is not None):
        modules = svc.index.modules_of_repo(found.repo.id)
        if len(modules) != 1:
            raise BadRequest(
                f"{found.feed} does not name one module; name it as NAMESPACE/NAME/SYSTEM"
            )
        module = modules[0]
    url = check_remote(svc.settings, remote) if remote is not None else None
    # Like `repo add`: a new remote must answer before anything changes.
    staged = svc.publisher.fetch_staged(url) if url and url != found.repo.url else None
    try:
        svc.registrations.change(
            found.repo.id,
            url,
            module.id if module else None,
            check_subdir(subdir) if subdir is not None else (module.subdir if module else ""),
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
        svc.publisher.drop_mirror(found.repo)
        svc.publisher.adopt_staged(staged, found.repo)
    return f"changed {found.feed}"

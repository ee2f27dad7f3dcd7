"""`gitreg repo add|list|remove|set`, `gitreg sync`, `gitreg modules`."""

from __future__ import annotations

import json
import sys
from typing import Any

from gitreg.addresses import parse_module_address
from gitreg.errors import GitError, NotFound
from gitreg.modules.publisher import SyncResult, sync_status
from gitreg.registration import RepoSource, module_link, register_repo, remove_repo, set_repo
from gitreg.services import Services
from gitreg.storage.records import RepoRecord
from gitreg.versions import sort_key


def _print_result(result: SyncResult, verbose: bool) -> None:
    for line in result.published:
        print(f"published {line}")
    for line in result.conflicts:
        print(f"conflict  {line}")
    if verbose:
        for line in result.ignored:
            print(f"ignored   {line}")


def repo_add(
    svc: Services,
    url: str,
    module: str,
    subdir: str,
    tag_prefix: str,
    forge_repo: str,
    webhook_secret: str,
    sync: bool,
) -> int:
    link = module_link(module, subdir, tag_prefix)
    # With sync, register_repo fetches before it commits: a wrong URL leaves nothing.
    repo = register_repo(svc, RepoSource(url, forge_repo, webhook_secret), link, fetch_first=sync)
    print(f"registered {link.namespace}/{link.name}/{link.system} from {repo.url}")
    if not sync:
        return 0
    result = svc.publisher.sync_repo(repo)
    _print_result(result, verbose=False)
    print(result.summary())
    return 0


def repo_remove(svc: Services, target: str, keep_versions: bool) -> int:
    print(remove_repo(svc, target, keep_versions))
    return 0


def repo_set(
    svc: Services, target: str, remote: str | None, subdir: str | None, tag_prefix: str | None
) -> int:
    print(set_repo(svc, target, remote, subdir, tag_prefix))
    return 0


def repo_list(svc: Services, as_json: bool) -> int:
    repos = svc.index.repos()
    rows: list[dict[str, Any]] = [
        {
            "url": r.url,
            "forge_repo": r.forge_repo,
            "modules": [m.address for m in svc.index.modules_of_repo(r.id)],
            "providers": [p.address for p in svc.providers.store.providers_of_repo(r.id)],
            "status": sync_status(r),
            "last_fetch_at": r.last_fetch_at,
            "last_fetch_error": r.last_fetch_error,
        }
        for r in repos
    ]
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        error = row["last_fetch_error"]
        status = f"error: {error}" if error else row["status"]
        feeds = ", ".join([*row["modules"], *(f"provider {p}" for p in row["providers"])])
        print(f"{row['url']}  [{row['forge_repo']}]  {feeds}  ({status})")
    return 0


def _repos_to_sync(svc: Services, address: str | None) -> list[RepoRecord]:
    if not address:
        return svc.index.repos()
    parsed = parse_module_address(address)
    module = svc.index.find_module(parsed.namespace, parsed.name, parsed.system)
    if module is None:
        raise NotFound(f"module {parsed} is not registered")
    repo = svc.index.repo(module.repo_id)
    if repo.removed_at is not None:
        raise NotFound(f"module {parsed}'s repository was removed; its versions are kept")
    return [repo]


def sync(svc: Services, address: str | None, verbose: bool) -> int:
    failed = 0
    for repo in _repos_to_sync(svc, address):
        try:
            result = svc.publisher.sync_repo(repo)
        except GitError as exc:
            print(f"gitreg: {repo.url}: {exc}", file=sys.stderr)
            failed += 1
            continue
        _print_result(result, verbose)
        print(result.summary())
    return 1 if failed else 0


def _module_rows(svc: Services) -> list[dict[str, Any]]:
    rows = []
    for module in svc.index.modules():
        repo = svc.index.repo(module.repo_id)
        versions = sorted(svc.index.versions(module.id), key=lambda v: sort_key(v.version))
        rows.append(
            {
                "address": module.address,
                "repository": repo.url,
                "subdir": module.subdir,
                "tag_prefix": module.tag_prefix,
                "versions": [
                    {
                        "version": v.version,
                        "tag": v.tag,
                        "tag_sha": v.tag_sha,
                        "commit": v.commit_sha,
                        "tree": v.tree_sha,
                        "archive_sha256": v.archive_sha256,
                        "archive_size": v.archive_size,
                        "published_at": v.published_at,
                        "yanked": v.yanked,
                    }
                    for v in versions
                ],
                "conflicts": [c.reason for c in svc.index.conflicts(module.id)],
                "ignored_tags": json.loads(module.sync_report),
                "last_sync_at": module.last_sync_at,
            }
        )
    return rows


def modules(svc: Services, as_json: bool, verbose: bool) -> int:
    rows = _module_rows(svc)
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(
            "no modules registered; add one with `gitreg repo add GIT_URL --module NS/NAME/SYSTEM`"
        )
        return 0
    width = max(len(r["address"]) for r in rows)
    print(f"{'MODULE':<{width}}  VERSIONS")
    for row in rows:
        listed = ", ".join(
            v["version"] + (" (yanked)" if v["yanked"] else "") for v in row["versions"]
        )
        print(f"{row['address']:<{width}}  {listed or '-'}")
        if row["conflicts"]:
            print(f"{'':<{width}}  {len(row['conflicts'])} conflict(s); see --verbose")
        if verbose:
            print(
                f"{'':<{width}}  source {row['repository']} subdir={row['subdir'] or '.'}"
                f" tag-prefix={row['tag_prefix'] or '-'}"
            )
            for v in row["versions"]:
                print(
                    f"{'':<{width}}  {v['version']}: tag {v['tag']} commit {v['commit'][:12]}"
                    f" tree {v['tree'][:12]} archive sha256 {v['archive_sha256']}"
                )
            for line in row["conflicts"]:
                print(f"{'':<{width}}  conflict: {line}")
            for line in row["ignored_tags"]:
                print(f"{'':<{width}}  ignored: {line}")
    return 0

"""`gitreg repo add|list|remove|set`, `gitreg sync`, `gitreg modules`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gitreg.catalog.records import deprecation, latest_listed
from gitreg.cli_handlers import ReadOnly
from gitreg.errors import BadRequest, GitError
from gitreg.modules.publisher import SyncResult, sync_status
from gitreg.providers.cli import add_repo_options, repo_add_provider
from gitreg.repositories.service import (
    ModuleListing,
    RepoSource,
    module_glob_link,
    module_link,
)
from gitreg.services import Services
from gitreg.storage.records import RepoRecord

Parser = argparse.ArgumentParser


def _print_result(result: SyncResult, verbose: bool) -> None:
    for line in result.registered:
        print(f"registered {line}")
    for line in result.published:
        print(f"published {line}")
    for line in result.conflicts:
        print(f"conflict  {line}")
    if verbose:
        for line in result.ignored:
            print(f"ignored   {line}")


def _synced(svc: Services, repo: RepoRecord) -> None:
    result = svc.repositories.sync_modules(repo)
    _print_result(result, verbose=False)
    print(result.summary())


def repo_add(
    svc: Services,
    url: str,
    module: str,
    subdir: str,
    tag_prefix: str,
    forge_repo: str,
    webhook_secret: str,
    sync: bool,
    semver_check: str | None = None,
) -> int:
    link = module_link(module, subdir, tag_prefix)
    # With sync, the remote is fetched before anything is written: a wrong URL leaves nothing.
    source = RepoSource(url, forge_repo, webhook_secret)
    repo = svc.repositories.add(source, link, fetch_first=sync).repo
    print(f"registered {link.namespace}/{link.name}/{link.system} from {repo.url}")
    if semver_check is not None:  # before the first sync, which it applies to
        print(svc.semver.set_policy(repo.url, semver_check))
    if sync:
        _synced(svc, repo)
    return 0


def repo_add_modules(svc: Services, args: argparse.Namespace) -> int:
    """`repo add URL --modules PATTERN`: every module directory under PATTERN."""
    link = module_glob_link(
        args.modules, args.namespace, args.system, args.tag_pattern, args.whole_tree
    )
    source = RepoSource(args.url, args.forge_repo, args.webhook_secret)
    repo = svc.repositories.add(source, link, fetch_first=not args.no_sync).repo
    tags = f"tags {link.tag_pattern}" if link.tag_pattern else "shared tags"
    print(
        f"registered {link.pattern} as {link.namespace}/{{name}}/{link.system}"
        f" ({tags}) from {repo.url}"
    )
    if args.semver_check is not None:
        print(svc.semver.set_policy(repo.url, args.semver_check))
    if not args.no_sync:
        _synced(svc, repo)
    return 0


def repo_remove(svc: Services, target: str, keep_versions: bool) -> int:
    print(svc.repositories.remove(target, keep_versions))
    return 0


def repo_set(
    svc: Services,
    target: str,
    remote: str | None,
    subdir: str | None,
    tag_prefix: str | None,
    semver_check: str | None = None,
) -> int:
    if semver_check is not None:
        print(svc.semver.set_policy(target, semver_check))
    if semver_check is None or (remote, subdir, tag_prefix) != (None, None, None):
        print(svc.repositories.change(target, remote, subdir, tag_prefix))
    return 0


def repo_list(svc: Services, as_json: bool) -> int:
    rows: list[dict[str, Any]] = [
        {
            "url": r.repo.url,
            "forge_repo": r.repo.forge_repo,
            "modules": r.modules,
            "providers": r.providers,
            "status": sync_status(r.repo),
            "last_fetch_at": r.repo.last_fetch_at,
            "last_fetch_error": r.repo.last_fetch_error,
        }
        for r in svc.repositories.listing()
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


def sync(svc: Services, address: str | None, verbose: bool) -> int:
    failed = 0
    for repo in svc.repositories.to_sync(address):
        try:
            result = svc.repositories.sync_modules(repo)
        except GitError as exc:
            print(f"gitreg: {repo.url}: {exc}", file=sys.stderr)
            failed += 1
            continue
        _print_result(result, verbose)
        print(result.summary())
    return 1 if failed else 0


def _module_row(found: ModuleListing, labels: dict[str, str]) -> dict[str, Any]:
    module = found.module
    return {
        "address": module.address,
        "repository": found.repo.url,
        "subdir": module.subdir,
        "tag_prefix": module.tag_prefix,
        "latest": chosen.version if (chosen := latest_listed(list(found.versions))) else None,
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
                "deprecation": deprecation(v),
                "semver": labels.get(v.version) or None,
            }
            for v in found.versions
        ],
        "conflicts": [c.reason for c in found.conflicts],
        "ignored_tags": json.loads(module.sync_report),
        "last_sync_at": module.last_sync_at,
    }


def _marks(version: dict[str, Any], latest: str | None) -> str:
    marks = ["latest"] * (version["version"] == latest)
    marks += ["yanked"] * bool(version["yanked"]) + ["deprecated"] * bool(version["deprecation"])
    marks += [version["semver"]] * bool(version["semver"])
    return f" ({', '.join(marks)})" if marks else ""


def modules(svc: Services, as_json: bool, verbose: bool) -> int:
    rows = [
        _module_row(m, svc.semver.labels(m.module.id)) for m in svc.repositories.module_listing()
    ]
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
        listed = ", ".join(v["version"] + _marks(v, row["latest"]) for v in row["versions"])
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
            for line in row["conflicts"]:  # each reason says "conflict: ..." itself
                print(f"{'':<{width}}  conflict: {line.removeprefix('conflict: ')}")
            for line in row["ignored_tags"]:
                print(f"{'':<{width}}  ignored: {line}")
    return 0


def _repo_add_command(svc: Services, args: argparse.Namespace) -> int:
    """`repo add` registers a module, or with --provider a provider repository."""
    if args.provider:
        if args.semver_check is not None:
            raise BadRequest("--semver-check goes with --module or --modules")
        return repo_add_provider(svc, args)
    glob_only = [args.namespace, args.system, args.tag_pattern, args.whole_tree]
    if args.modules:
        if args.subdir or args.tag_prefix:
            raise BadRequest("--modules takes --tag-pattern, not --subdir or --tag-prefix")
        return repo_add_modules(svc, args)
    if any(glob_only):
        raise BadRequest("--namespace, --system, --tag-pattern and --whole-tree go with --modules")
    return repo_add(
        svc,
        args.url,
        args.module,
        args.subdir,
        args.tag_prefix,
        args.forge_repo,
        args.webhook_secret,
        not args.no_sync,
        args.semver_check,
    )


def _register_repo_add(repo_sub: argparse._SubParsersAction[Parser], common: Parser) -> None:
    add = repo_sub.add_parser(
        "add", parents=[common], help="register a repository's module or provider"
    )
    add.add_argument("url", help="https, ssh, or a local path / file:// URL")
    what = add.add_mutually_exclusive_group(required=True)
    what.add_argument("--module", metavar="NAMESPACE/NAME/SYSTEM")
    what.add_argument("--provider", metavar="NAMESPACE/TYPE", help="publish its forge releases")
    what.add_argument(
        "--modules",
        metavar="PATTERN",
        help="every module directory under PATTERN (e.g. 'modules/*'), now and later;"
        " needs --namespace and --system",
    )
    add.add_argument("--subdir", default="", help="the module's directory in a monorepo")
    add.add_argument("--tag-prefix", default="", help="e.g. 'vpc/' for tags like vpc/v1.2.0")
    add.add_argument(
        "--forge-repo",
        default="",
        metavar="OWNER/REPO",
        help="the repository's name on its forge (default: from the URL)",
    )
    add.add_argument(
        "--webhook-secret",
        default="",
        metavar="SECRET|env:NAME|file:PATH",
        help="this repository's webhook secret, or where to read it (docs/webhooks.md)",
    )
    add.add_argument("--no-sync", action="store_true", help="register only, publish later")
    _add_semver_option(add)
    _add_glob_options(add)
    add_repo_options(add)
    add.set_defaults(handler=_repo_add_command)


def _add_glob_options(add: Parser) -> None:
    """The options of `repo add --modules` (docs/modules.md "Monorepos")."""
    add.add_argument("--namespace", default="", help="with --modules: the modules' namespace")
    add.add_argument("--system", default="", help="with --modules: the modules' system")
    add.add_argument(
        "--tag-pattern",
        default="",
        metavar="PATTERN",
        help="with --modules: tags per module, e.g. '{name}/v{version}'"
        " (default: every module gets every v* tag)",
    )
    add.add_argument(
        "--whole-tree",
        action="store_true",
        help="with --modules: archive the whole repository for each module (for"
        " modules that use ../ paths) instead of the module's directory alone",
    )


def _register_repo_changes(repo_sub: argparse._SubParsersAction[Parser], common: Parser) -> None:
    """`repo list`, `repo remove` and `repo set`."""
    listing = repo_sub.add_parser("list", parents=[common], help="list repositories")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=ReadOnly(lambda svc, a: repo_list(svc, a.json)))
    remove = repo_sub.add_parser("remove", parents=[common], help="unregister a repository")
    remove.add_argument("target", metavar="URL|NAMESPACE/NAME/SYSTEM|NAMESPACE/TYPE")
    remove.add_argument(
        "--keep-versions",
        action="store_true",
        help="unregister even with published versions, which keep serving",
    )
    remove.set_defaults(handler=lambda svc, a: repo_remove(svc, a.target, a.keep_versions))
    change = repo_sub.add_parser("set", parents=[common], help="change a registered repository")
    change.add_argument("target", metavar="URL|NAMESPACE/NAME/SYSTEM|NAMESPACE/TYPE")
    change.add_argument("--remote", help="a new git URL (fetched before it is saved)")
    change.add_argument("--subdir", help="the module's new directory in a monorepo")
    change.add_argument("--tag-prefix", help="the module's new tag prefix ('' for none)")
    _add_semver_option(change)
    change.set_defaults(
        handler=lambda svc, a: repo_set(
            svc, a.target, a.remote, a.subdir, a.tag_prefix, a.semver_check
        )
    )


def _add_semver_option(parser: Parser) -> None:
    parser.add_argument(
        "--semver-check",
        choices=("off", "warn", "enforce", "default"),
        help="a breaking change in a minor/patch release: publish it silently (off),"
        " publish and label it (warn) or refuse it (enforce); default: the semver_check"
        " setting (docs/semver-guard.md)",
    )


def register(sub: argparse._SubParsersAction[Parser], common: Parser) -> None:
    """Add `repo add|list|remove|set` and `sync`; each sets `handler(svc, args)`."""
    repo = sub.add_parser("repo", parents=[common], help="register repositories")
    repo_sub = repo.add_subparsers(dest="repo_command", required=True)
    _register_repo_add(repo_sub, common)
    _register_repo_changes(repo_sub, common)

    sync_parser = sub.add_parser("sync", parents=[common], help="fetch and publish new tags")
    sync_parser.add_argument("module", nargs="?", metavar="NAMESPACE/NAME/SYSTEM")
    sync_parser.add_argument("--verbose", "-v", action="store_true")
    sync_parser.set_defaults(handler=lambda svc, a: sync(svc, a.module, a.verbose))


def register_modules(sub: argparse._SubParsersAction[Parser], common: Parser) -> None:
    """Add `modules`; separate from `register` so `gitreg --help` keeps its order."""
    listing = sub.add_parser("modules", parents=[common], help="list modules and versions")
    listing.add_argument("--json", action="store_true")
    listing.add_argument("--verbose", "-v", action="store_true")
    listing.set_defaults(handler=ReadOnly(lambda svc, a: modules(svc, a.json, a.verbose)))

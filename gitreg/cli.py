"""The `gitreg` command line: parse flags, load settings once, dispatch.

Commands stay thin; the work lives in `gitreg.commands.*` and the services.
Errors print as `gitreg: error: ...` and exit non-zero, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gitreg import __version__
from gitreg.errors import BadRequest, ConfigError, GitregError, is_storage_full, storage_full
from gitreg.services import build_services
from gitreg.settings import Settings, load_settings


def _common(default: Any) -> argparse.ArgumentParser:
    """Flags every command takes, before or after the command name.

    The top-level parser defaults them to None; every subcommand parser defaults
    them to SUPPRESS, so a subcommand that was not given the flag leaves the
    value parsed before it alone (argparse would otherwise overwrite
    `gitreg --data-dir D sync` with the subparser's None).
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-dir", type=Path, default=default, help="where gitreg keeps everything"
    )
    common.add_argument("--config", type=Path, default=default, help="TOML config file")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common(default=argparse.SUPPRESS)
    parser = argparse.ArgumentParser(
        prog="gitreg",
        description="A Terraform registry that publishes from Git tags.",
        parents=[_common(default=None)],
    )
    parser.add_argument("--version", action="version", version=f"gitreg {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", parents=[common], help="run the registry")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--public-url", help="URL Terraform users reach gitreg at")
    serve.add_argument("--tls-cert", type=Path)
    serve.add_argument("--tls-key", type=Path)
    serve.add_argument(
        "--no-tls",
        action="store_true",
        default=None,
        help="plain HTTP, for running behind a TLS-terminating proxy",
    )
    serve.add_argument(
        "--trust-forwarded",
        action="store_true",
        default=None,
        help="honour X-Forwarded-Proto/Host (only behind your own proxy)",
    )
    serve.add_argument("--workers", type=int)
    serve.add_argument("--job-workers", type=int, help="threads running webhook jobs (0: none)")
    serve.add_argument(
        "--reconcile-interval", type=float, help="seconds between remote tag checks (0: off)"
    )
    serve.add_argument(
        "--yank-deleted-tags",
        action="store_true",
        default=None,
        help="yank a version when its tag is deleted upstream",
    )
    serve.add_argument("--log-level")
    serve.add_argument(
        "--upstream",
        action="append",
        metavar="HOSTNAME=BASE_URL",
        help="mirror: fetch HOSTNAME's providers from BASE_URL (repeatable)",
    )

    repo = sub.add_parser("repo", parents=[common], help="register repositories")
    repo_sub = repo.add_subparsers(dest="repo_command", required=True)
    add = repo_sub.add_parser(
        "add", parents=[common], help="register a repository's module or provider"
    )
    add.add_argument("url", help="https, ssh, or a local path / file:// URL")
    what = add.add_mutually_exclusive_group(required=True)
    what.add_argument("--module", metavar="NAMESPACE/NAME/SYSTEM")
    what.add_argument("--provider", metavar="NAMESPACE/TYPE", help="publish its forge releases")
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
    lst = repo_sub.add_parser("list", parents=[common], help="list repositories")
    lst.add_argument("--json", action="store_true")
    remove = repo_sub.add_parser("remove", parents=[common], help="unregister a repository")
    remove.add_argument("target", metavar="URL|NAMESPACE/NAME/SYSTEM|NAMESPACE/TYPE")
    remove.add_argument(
        "--keep-versions",
        action="store_true",
        help="unregister even with published versions, which keep serving",
    )
    change = repo_sub.add_parser("set", parents=[common], help="change a registered repository")
    change.add_argument("target", metavar="URL|NAMESPACE/NAME/SYSTEM|NAMESPACE/TYPE")
    change.add_argument("--remote", help="a new git URL (fetched before it is saved)")
    change.add_argument("--subdir", help="the module's new directory in a monorepo")
    change.add_argument("--tag-prefix", help="the module's new tag prefix ('' for none)")

    sync = sub.add_parser("sync", parents=[common], help="fetch and publish new tags")
    sync.add_argument("module", nargs="?", metavar="NAMESPACE/NAME/SYSTEM")
    sync.add_argument("--verbose", "-v", action="store_true")

    backup = sub.add_parser("backup", parents=[common], help="copy a live data dir consistently")
    backup.add_argument("dest", type=Path, help="directory to write the backup to")

    # Command groups that register their own parsers set `handler(svc, args)`.
    from gitreg.commands import access, jobs, providers

    access.register(sub, common)
    jobs.register(sub, common)
    providers.register(sub, common)
    providers.add_repo_options(add)
    from gitreg.commands import mirror as mirror_commands

    mirror_commands.register(sub, common)

    mods = sub.add_parser("modules", parents=[common], help="list modules and versions")
    mods.add_argument("--json", action="store_true")
    mods.add_argument("--verbose", "-v", action="store_true")
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    flags: dict[str, Any] = {
        key: getattr(args, key, None)
        for key in (
            "data_dir",
            "host",
            "port",
            "public_url",
            "tls_cert",
            "tls_key",
            "no_tls",
            "trust_forwarded",
            "workers",
            "job_workers",
            "reconcile_interval",
            "yank_deleted_tags",
            "log_level",
        )
    }
    if getattr(args, "upstream", None):  # repeatable --upstream HOST=URL
        flags["upstream"] = ",".join(args.upstream)
    return load_settings(flags, config_file=args.config)


def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    from gitreg.commands import admin, repos, serve

    if args.command == "serve":
        return serve.serve(settings)
    # Commands that may run without a local data dir (e.g. uploading to a server).
    standalone = getattr(args, "standalone", None)
    if standalone is not None and (code := standalone(args, settings)) is not None:
        return int(code)
    svc = build_services(settings)
    try:
        handler = getattr(args, "handler", None)
        if handler is not None:
            return int(handler(svc, args))
        if args.command == "repo" and args.repo_command == "add" and args.provider:
            from gitreg.commands.providers import repo_add_provider

            return repo_add_provider(svc, args)
        if args.command == "repo" and args.repo_command == "add":
            return repos.repo_add(
                svc,
                args.url,
                args.module,
                args.subdir,
                args.tag_prefix,
                args.forge_repo,
                args.webhook_secret,
                not args.no_sync,
            )
        if args.command == "repo" and args.repo_command == "list":
            return repos.repo_list(svc, args.json)
        if args.command == "repo" and args.repo_command == "remove":
            return repos.repo_remove(svc, args.target, args.keep_versions)
        if args.command == "repo" and args.repo_command == "set":
            return repos.repo_set(svc, args.target, args.remote, args.subdir, args.tag_prefix)
        if args.command == "sync":
            return repos.sync(svc, args.module, args.verbose)
        if args.command == "modules":
            return repos.modules(svc, args.json, args.verbose)
        if args.command == "backup":
            return admin.backup(svc, args.dest)
    finally:
        svc.close()
    raise BadRequest(f"unknown command {args.command}")


class _QuietFullDiskCleanup:
    """A library's cleanup in `__del__` (dulwich closing a lock file) meets the
    same full disk again after the command already said so in one line; that
    repeat is not worth a traceback. Anything else goes to the previous hook."""

    def __init__(self, previous: Callable[[Any], object]) -> None:
        self.previous = previous

    def __call__(self, unraisable: Any) -> None:
        if unraisable.exc_value is not None and is_storage_full(unraisable.exc_value):
            return
        self.previous(unraisable)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not isinstance(sys.unraisablehook, _QuietFullDiskCleanup):
        sys.unraisablehook = _QuietFullDiskCleanup(sys.unraisablehook)
    logging.basicConfig(
        level=logging.WARNING if args.command != "serve" else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return _dispatch(args, _settings(args))
    except GitregError as exc:
        print(f"gitreg: error: {exc}", file=sys.stderr)
        # Exit codes are the CLI's own, never `exc.status` (an HTTP status): 2 when
        # the command's input is refused, as argparse does for bad usage; 1 else.
        refused = isinstance(exc, BadRequest) or (isinstance(exc, ConfigError) and exc.user_input)
        return 2 if refused else 1
    except (OSError, sqlite3.Error) as exc:
        # A full disk met outside the storage layer (git objects, a temp file):
        # one line for the operator, not a traceback. Anything else is a bug.
        full = storage_full(exc, str(getattr(exc, "filename", None) or "the data dir"))
        if full is None:
            raise
        print(f"gitreg: error: {full}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130

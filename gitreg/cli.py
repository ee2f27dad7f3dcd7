"""The `gitreg` command line: parse flags, load settings once, dispatch.

Commands stay thin: each feature's `cli.py` registers its own and calls its services.
Errors print as `gitreg: error: ...` and exit non-zero, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gitreg import __version__, logs
from gitreg.audit.actor import Actor, act_as
from gitreg.cli_handlers import ReadOnly
from gitreg.errors import (
    BadRequest,
    ConfigError,
    GitregError,
    NotFound,
    is_storage_full,
    operator_text,
    storage_full,
)
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
    common.add_argument(
        "--database-url",
        default=default,
        help="postgresql://USER:PASS@HOST:PORT/DB: a shared index (default: SQLite)",
    )
    common.add_argument(
        "--secret-key-file",
        type=Path,
        default=default,
        help="key sealing the secrets shared through the database",
    )
    common.add_argument(
        "--blob-store", default=default, help="s3://BUCKET/PREFIX (default: DATA_DIR/blobs)"
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser; every command group registers its own subparsers.

    Each leaf sets `handler(svc, args)`, or `standalone(args, settings)` for a
    command that may run without Services (see `_dispatch`). The order of the
    groups is the order `gitreg --help` lists them in.
    """
    from gitreg.attestations import cli as attestations
    from gitreg.audit import cli as audit
    from gitreg.auth import cli as access
    from gitreg.catalog import cli as reindex
    from gitreg.doctor import cli as doctor
    from gitreg.jobs import cli as jobs
    from gitreg.mirror import cli as mirror
    from gitreg.module_proxy import cli as module_proxy
    from gitreg.modules import cli as modules
    from gitreg.oci import cli as oci
    from gitreg.providers import cli as providers
    from gitreg.repositories import cli as repos
    from gitreg.semver_guard import cli as semver
    from gitreg.server import cli as serve
    from gitreg.storage import cli as storage
    from gitreg.verify import cli as verify

    common = _common(default=argparse.SUPPRESS)
    parser = argparse.ArgumentParser(
        prog="gitreg",
        description="A Terraform registry that publishes from Git tags.",
        parents=[_common(default=None)],
    )
    parser.add_argument("--version", action="version", version=f"gitreg {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve.register(sub, common)
    repos.register(sub, common)
    storage.register(sub, common)
    access.register(sub, common)
    jobs.register(sub, common)
    providers.register(sub, common, attestations.register_key_commands)
    mirror.register(sub, common)
    repos.register_modules(sub, common)
    module_proxy.register(sub, common)
    semver.register(sub, common)
    doctor.register(sub, common)
    modules.register(sub, common)
    reindex.register(sub, common)
    oci.register(sub, common)
    access.register_grants(sub, common)
    audit.register(sub, common)
    verify.register(sub, common)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    flags: dict[str, Any] = {
        key: getattr(args, key, None)
        for key in (
            "data_dir",
            "database_url",
            "secret_key_file",
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
            "log_format",
            "blob_store",
            "metrics_listen",
        )
    }
    if getattr(args, "upstream", None):  # repeatable --upstream HOST=URL
        flags["upstream"] = ",".join(args.upstream)
    refuse = not getattr(args, "lists_unknown_settings", False)  # `doctor` reports them
    return load_settings(flags, config_file=args.config, refuse_unknown=refuse)


def _require_registry(settings: Settings) -> None:
    """A command that only reads needs a registry to read: opening the services
    would create an empty one at a mistyped --data-dir (or an empty database)."""
    from gitreg.storage.schema_status import schema_status

    status = schema_status(settings.database_url, settings.db_path)
    if status.exists:
        return
    if settings.database_url:
        raise NotFound(
            f"no registry at {status.where}: the database holds no gitreg index;"
            " check --database-url (GITREG_DATABASE_URL)"
        )
    raise NotFound(
        f"no registry at {settings.data_dir}: there is no index.sqlite3 there; check"
        " --data-dir (GITREG_DATA_DIR), or start one with `gitreg repo add`"
    )


def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    # Commands that may run without a local data dir (`serve`, uploading to a
    # server) go first; one that returns None asks for the local handler.
    standalone = getattr(args, "standalone", None)
    if standalone is not None and (code := standalone(args, settings)) is not None:
        return int(code)
    handler = getattr(args, "handler", None)
    if handler is None:
        raise BadRequest(f"unknown command {args.command}")
    if isinstance(handler, ReadOnly):
        _require_registry(settings)
    act_as(Actor.operator())  # whom this command's audit rows name
    svc = build_services(settings)
    try:
        return int(handler(svc, args))
    finally:
        svc.close()


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
    # `serve` configures logging again once its settings are read (gitreg/logs.py).
    logs.configure("text", logging.WARNING if args.command != "serve" else logging.INFO)
    try:
        return _dispatch(args, _settings(args))
    except GitregError as exc:
        logs.report_error(operator_text(exc))
        # Exit codes are the CLI's own, never `exc.status` (an HTTP status): 2 when
        # the command's input is refused, as argparse does for bad usage; 1 else.
        refused = isinstance(exc, BadRequest) or (isinstance(exc, ConfigError) and exc.user_input)
        return 2 if refused else 1
    except OSError as exc:
        # A full disk met outside the storage layer (git objects, a temp file):
        # one line for the operator, not a traceback. Anything else is a bug.
        full = storage_full(exc, str(getattr(exc, "filename", None) or "the data dir"))
        if full is None:
            raise
        logs.report_error(str(full))
        return 1
    except KeyboardInterrupt:
        return 130

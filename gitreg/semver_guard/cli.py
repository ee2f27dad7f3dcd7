"""`gitreg modules allow-breaking NAMESPACE/NAME/SYSTEM VERSION`: publish one
version the semver guard refused, on purpose (docs/semver-guard.md)."""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from gitreg.services import Services


def allow_breaking(svc: Services, address: str, version: str, by: str) -> int:
    print(f"allowed {address} {version} to publish with its breaking changes; syncing")
    print(svc.semver.allow_breaking(address, version, by))
    return 0


def _operator() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return "an operator"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: Any) -> None:
    """Add `allow-breaking` to the subcommands of `gitreg modules` (after
    gitreg/module_proxy/cli.py has made them)."""
    modules = sub.choices["modules"]
    commands = next(a for a in modules._actions if isinstance(a, argparse._SubParsersAction))
    allow = commands.add_parser(
        "allow-breaking",
        parents=[common],
        help="publish a version refused for a breaking change in a minor/patch release",
    )
    allow.add_argument("address", metavar="NAMESPACE/NAME/SYSTEM")
    allow.add_argument("version", metavar="VERSION")
    allow.add_argument(
        "--by", default="", help="who allows it, as recorded (default: the user running this)"
    )
    allow.set_defaults(
        handler=lambda svc, a: allow_breaking(svc, a.address, a.version, a.by or _operator())
    )

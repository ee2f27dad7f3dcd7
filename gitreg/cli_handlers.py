"""What command handlers share: the mark of a command that only reads the
registry, and the `yank`/`unyank` pair that modules and providers both have."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gitreg.services import Services


class ReadOnly:
    """A command handler that only reads the registry. Where there is none (a
    mistyped --data-dir), `gitreg.cli` says so instead of creating one to read."""

    def __init__(self, handler: Callable[[Services, argparse.Namespace], int]) -> None:
        self.handler = handler

    def __call__(self, svc: Services, args: argparse.Namespace) -> int:
        return self.handler(svc, args)


YankHandler = Callable[["Services", str, str, bool], int]


def report_yank(what: str, version: str, yanked: bool, changed: bool, effect: str) -> None:
    """One line on what a yank or unyank of `what` (e.g. "module a/b/c") did;
    `effect` says what a yank means for its consumers."""
    verb = "yanked" if yanked else "unyanked"
    if changed:
        print(f"{verb} {what} {version}: {effect if yanked else 'listed again'}")
    else:
        print(f"{what} {version} was already {verb}; nothing changed")


def add_yank_pair(
    sub: Any, common: argparse.ArgumentParser, metavar: str, what: str, handler: YankHandler
) -> None:
    """Add `yank` and `unyank ADDRESS VERSION` for a kind of package (`what`)."""
    for verb, yanked in (("yank", True), ("unyank", False)):
        helps = {
            True: f"withdraw a {what} version from version lists (its files stay served)",
            False: f"list a yanked {what} version again",
        }
        parser = sub.add_parser(verb, parents=[common], help=helps[yanked])
        parser.add_argument("address", metavar=metavar)
        parser.add_argument("version", metavar="VERSION")
        parser.set_defaults(handler=lambda svc, a, y=yanked: handler(svc, a.address, a.version, y))

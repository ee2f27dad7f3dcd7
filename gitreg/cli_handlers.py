"""What command handlers share: the mark of a command that only reads the registry."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gitreg.services import Services


class ReadOnly:
    """A command handler that only reads the registry. Where there is none (a
    mistyped --data-dir), `gitreg.cli` says so instead of creating one to read."""

    def __init__(self, handler: Callable[[Services, argparse.Namespace], int]) -> None:
        self.handler = handler

    def __call__(self, svc: Services, args: argparse.Namespace) -> int:
        return self.handler(svc, args)

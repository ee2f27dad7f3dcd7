"""`gitreg provider yank|unyank`: the providers' counterpart of `gitreg module
yank`, worded and registered as it is (gitreg/modules/cli.py).

A yanked provider version leaves `/v1/providers/.../versions` and the mirror's
`index.json` but its files stay served by exact version, so Terraform no
longer installs it, lock files that pin it included.
"""

from __future__ import annotations

import argparse
from typing import Any

from gitreg.addresses import parse_local_provider_address
from gitreg.modules.cli import add_yank_pair, report_yank
from gitreg.services import Services

Parser = argparse.ArgumentParser

PROVIDER_YANKED = (
    "hidden from version lists: Terraform no longer installs it, lock files"
    " pinning it included; its files stay served by exact version"
)


def _report(what: str, version: str, yanked: bool, changed: bool) -> None:
    report_yank(what, version, yanked, changed, PROVIDER_YANKED)


def provider_yank(svc: Services, address: str, version: str, yanked: bool) -> int:
    parsed = parse_local_provider_address(address)
    done = svc.provider_service.set_yanked(parsed, version, yanked)
    _report(f"provider {done.address}", done.version, yanked, done.changed)
    return 0


def register_provider(provider_sub: Any, common: Parser) -> None:
    """Add `provider yank|unyank` to the `provider` group of gitreg.providers.cli."""
    add_yank_pair(provider_sub, common, "NAMESPACE/TYPE", "provider", provider_yank)

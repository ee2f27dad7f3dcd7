"""`gitreg module yank|unyank` and `gitreg provider yank|unyank` (issue 15).

A yanked version leaves the version lists (`/v1/modules/.../versions`,
`/v1/providers/.../versions`, the mirror's `index.json`) but stays downloadable
by exact version. Terraform installs only listed versions, so for Terraform a
yank withdraws the version, from lock files that pin it too (the messages
below say so; tests/e2e/test_e2e_yank.py shows it). The write is an ordinary index
write: serving processes notice it as they notice a publish (SQLite's
`data_version`, PostgreSQL's change feed); this process's cache is cleared
directly, as publishers do.
"""

from __future__ import annotations

import argparse
from typing import Any

from gitreg.addresses import parse_local_provider_address
from gitreg.modules import cli as deprecate
from gitreg.services import Services
from gitreg.usage import cli as usage

Parser = argparse.ArgumentParser

_YANKED = {
    "module": "hidden from version lists: new `terraform init`s no longer select it;"
    " its archive stays served by exact version",
    "provider": "hidden from version lists: Terraform no longer installs it, lock files"
    " pinning it included; its files stay served by exact version",
}


def _report(what: str, version: str, yanked: bool, changed: bool) -> None:
    verb = "yanked" if yanked else "unyanked"
    if changed:
        effect = _YANKED[what.split()[0]] if yanked else "listed again"
        print(f"{verb} {what} {version}: {effect}")
    else:
        print(f"{what} {version} was already {verb}; nothing changed")


def module_yank(svc: Services, address: str, version: str, yanked: bool) -> int:
    module, key, found = deprecate.find_version(svc, address, version)
    changed = found.yanked != yanked
    if changed:
        svc.index.set_yanked(module.id, key, yanked)
        svc.docs.refresh_search(module)  # the latest may have changed: search holds its words
        svc.cache.invalidate()
    _report(f"module {module.address}", found.version, yanked, changed)
    return 0


def provider_yank(svc: Services, address: str, version: str, yanked: bool) -> int:
    parsed = parse_local_provider_address(address)
    done = svc.provider_service.set_yanked(parsed, version, yanked)
    _report(f"provider {done.address}", done.version, yanked, done.changed)
    return 0


def _add_pair(sub: Any, common: Parser, metavar: str, what: str, handler: Any) -> None:
    for verb, yanked in (("yank", True), ("unyank", False)):
        helps = {
            True: f"withdraw a {what} version from version lists (its files stay served)",
            False: f"list a yanked {what} version again",
        }
        parser = sub.add_parser(verb, parents=[common], help=helps[yanked])
        parser.add_argument("address", metavar=metavar)
        parser.add_argument("version", metavar="VERSION")
        parser.set_defaults(handler=lambda svc, a, y=yanked: handler(svc, a.address, a.version, y))


def register_module(sub: Any, common: Parser) -> None:
    """Add `module yank|unyank`, `module deprecate|undeprecate` and `module usage`."""
    module = sub.add_parser(
        "module", parents=[common], help="yank or deprecate module versions, or see who uses them"
    )
    module_sub = module.add_subparsers(dest="module_command", required=True)
    _add_pair(module_sub, common, "NAMESPACE/NAME/SYSTEM", "module", module_yank)
    deprecate.register(module_sub, common)
    usage.register(module_sub, common)


def register_provider(provider_sub: Any, common: Parser) -> None:
    """Add `provider yank|unyank` to the `provider` group of gitreg.providers.cli."""
    _add_pair(provider_sub, common, "NAMESPACE/TYPE", "provider", provider_yank)

"""`gitreg module yank|unyank|deprecate|undeprecate|usage`: curating published
module versions (gitreg/modules/service.py).

A yanked version leaves the version lists (`/v1/modules/.../versions`) but
stays downloadable by exact version. Terraform installs only listed versions,
so for Terraform a yank withdraws the version, from lock files that pin it too
(the messages below say so; tests/e2e/test_e2e_yank.py shows it).

A deprecated version stays in the version lists and installs as before. Its
entry in `/v1/modules/.../versions` carries `"deprecation": {"reason": ...,
"link": ...}`; the browse API and the web UI show it too. What each Terraform
version does with it is in docs/modules.md.
"""

from __future__ import annotations

import argparse
from typing import Any

from gitreg.addresses import parse_module_address
from gitreg.cli_handlers import add_yank_pair, report_yank
from gitreg.services import Services
from gitreg.usage import cli as usage

Parser = argparse.ArgumentParser

MODULE_YANKED = (
    "hidden from version lists: new `terraform init`s no longer select it;"
    " its archive stays served by exact version"
)


def module_yank(svc: Services, address: str, version: str, yanked: bool) -> int:
    done = svc.modules.set_yanked(parse_module_address(address), version, yanked)
    report_yank(f"module {done.module}", done.version, yanked, done.changed, MODULE_YANKED)
    return 0


def module_deprecate(svc: Services, address: str, version: str, reason: str, link: str) -> int:
    done = svc.modules.deprecate(parse_module_address(address), version, reason, link)
    what = f"module {done.module} {done.version}"
    if not done.changed:
        print(f"{what} was already deprecated with this reason; nothing changed")
        return 0
    verb = "deprecation updated for" if done.updated else "deprecated"
    print(f"{verb} {what}: still listed and installable; its version-list entry carries the reason")
    return 0


def module_undeprecate(svc: Services, address: str, version: str) -> int:
    done = svc.modules.undeprecate(parse_module_address(address), version)
    what = f"module {done.module} {done.version}"
    if not done.changed:
        print(f"{what} is not deprecated; nothing changed")
        return 0
    print(f"undeprecated {what}: its deprecation notice is gone")
    return 0


def _add_deprecation(module_sub: Any, common: Parser) -> None:
    metavar = "NAMESPACE/NAME/SYSTEM"
    deprecate = module_sub.add_parser(
        "deprecate",
        parents=[common],
        help="mark a module version deprecated (it stays listed and installable)",
    )
    deprecate.add_argument("address", metavar=metavar)
    deprecate.add_argument("version", metavar="VERSION")
    deprecate.add_argument("--reason", required=True, help="why, shown to consumers")
    deprecate.add_argument("--link", default="", help="https:// URL with more information")
    deprecate.set_defaults(
        handler=lambda svc, a: module_deprecate(svc, a.address, a.version, a.reason, a.link)
    )
    undeprecate = module_sub.add_parser(
        "undeprecate", parents=[common], help="lift a module version's deprecation"
    )
    undeprecate.add_argument("address", metavar=metavar)
    undeprecate.add_argument("version", metavar="VERSION")
    undeprecate.set_defaults(handler=lambda svc, a: module_undeprecate(svc, a.address, a.version))


def register(sub: Any, common: Parser) -> None:
    """Add the `module` group: yank, unyank, deprecate, undeprecate and usage."""
    module = sub.add_parser(
        "module", parents=[common], help="yank or deprecate module versions, or see who uses them"
    )
    module_sub = module.add_subparsers(dest="module_command", required=True)
    add_yank_pair(module_sub, common, "NAMESPACE/NAME/SYSTEM", "module", module_yank)
    _add_deprecation(module_sub, common)
    usage.register(module_sub, common)

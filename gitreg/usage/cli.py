"""`gitreg module usage NS/NAME/SYS [--versions 1] [--days 30] [--json]`.

The operator's view of who downloaded which versions (gitreg/usage/service.py),
read from the index this host's registry uses, so it needs no token.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from gitreg.addresses import parse_module_address
from gitreg.cli_handlers import ReadOnly
from gitreg.services import Services
from gitreg.usage.service import DEFAULT_DAYS, Tally, Usage


def _shown(name: str) -> str:
    """A name as an identity provider or operator wrote it, with control
    characters replaced: printed to a terminal, an escape sequence could
    rewrite what the operator sees."""
    return "".join("?" if ord(c) < 32 or 127 <= ord(c) < 160 else c for c in name)


def _versions(tally: Tally) -> str:
    return ", ".join(f"{v} ({n})" for v, n in sorted(tally.versions.items()))


def _print(found: Usage) -> None:
    which = f"versions {found.versions}" if found.versions else "all versions"
    print(f"{found.module}, {which}, {found.days} days since {found.since}: ", end="")
    print(f"{found.downloads} downloads")
    for version, count in sorted(found.per_version.items(), key=lambda i: (-i[1], i[0])):
        print(f"  {version:<20} {count:>8}")
    for title, tallies in (("people", found.people), ("teams", found.teams)):
        print(f"{title}:" if tallies else f"{title}: none")
        for t in tallies:
            shown = _shown(t.name) + (" (operator token)" if t.kind == "token" else "")
            print(f"  {shown:<40} {t.downloads:>8}  {_versions(t)}")


def module_usage_command(
    svc: Services, address: str, versions: str, days: int, as_json: bool
) -> int:
    parsed = parse_module_address(address)
    found = svc.usage.module_usage(parsed.namespace, parsed.name, parsed.system, versions, days)
    if as_json:
        print(json.dumps(found.to_json(), indent=2))
    else:
        _print(found)
    return 0


def register(module_sub: Any, common: argparse.ArgumentParser) -> None:
    """Add `usage` to the `module` group of gitreg.modules.cli."""
    usage = module_sub.add_parser(
        "usage",
        parents=[common],
        help="who downloaded which versions of a module lately (per version, person, team)",
    )
    usage.add_argument("address", metavar="NAMESPACE/NAME/SYSTEM")
    usage.add_argument(
        "--versions",
        default="",
        help='a version prefix (1, 1.2, 1.2.3) or a Terraform constraint (">= 1.2, < 2")',
    )
    usage.add_argument(
        "--days", type=int, default=DEFAULT_DAYS, help="the last N UTC days, today included (1-365)"
    )
    usage.add_argument("--json", action="store_true", help="print the API's JSON answer")
    usage.set_defaults(
        handler=ReadOnly(
            lambda svc, a: module_usage_command(svc, a.address, a.versions, a.days, a.json)
        )
    )

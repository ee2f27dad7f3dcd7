"""`gitreg grants`: what the `[[grants]]` table gives a set of groups (docs/sign-in.md)."""

from __future__ import annotations

import argparse

from gitreg.auth.grants import EVERY_NAMESPACE, effective, parse_grants
from gitreg.settings import Settings

Parser = argparse.ArgumentParser


def show_grants(settings: Settings, groups: str | None) -> int:
    """Standalone: reads only the config file, so it works before any data dir exists.
    An invalid table already failed in `load_settings`, as it fails `serve`."""
    grants = parse_grants(settings.extra.get("grants"))
    if not grants:
        print("no [[grants]] in the config file: nobody can sign in")
        return 0
    if groups is None:
        for grant in grants:
            print(f"group {grant.group!r}: {grant.scope.name} on {grant.namespace}")
        return 0
    names = [g.strip() for g in groups.split(",") if g.strip()]
    allowed = effective(grants, names)
    who = ", ".join(names) or "no groups"
    if not allowed:
        print(f"{who}: no grant; sign-in is refused")
        return 0
    print(f"{who}:")
    for namespace, scope in sorted(allowed.items(), key=lambda item: item[0] != EVERY_NAMESPACE):
        where = "every namespace" if namespace == EVERY_NAMESPACE else f"namespace {namespace}"
        print(f"  {scope.name} on {where}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: Parser) -> None:
    grants = sub.add_parser(
        "grants", parents=[common], help="check [[grants]] and show what groups may do"
    )
    grants.add_argument("--groups", default=None, help="comma-separated IdP group names")
    grants.set_defaults(standalone=lambda a, settings: show_grants(settings, a.groups))

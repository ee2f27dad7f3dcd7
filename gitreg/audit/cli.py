"""`gitreg audit [list] [--since 24h] [--actor A] [--action X] [--object O] [--json]`
and `gitreg audit prune`: the audit log (docs/audit.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gitreg.audit.store import AuditEntry, AuditQuery
from gitreg.audit.times import iso, parse_since
from gitreg.cli_handlers import ReadOnly
from gitreg.errors import BadRequest
from gitreg.services import Services


def _query(args: argparse.Namespace) -> AuditQuery:
    if args.limit < 1:
        raise BadRequest(f"--limit must be a positive number of rows, not {args.limit}")
    return AuditQuery(
        since=parse_since(args.since) if args.since else None,
        actor=args.actor,
        action=args.action,
        object=args.object,
        limit=args.limit,
    )


def _line(entry: AuditEntry) -> str:
    who = f"{entry.actor_kind} {entry.actor}"
    if entry.rule:
        who += f" (rule {entry.rule})"
    text = f"{iso(entry.at)} {entry.action} {entry.object or '-'} {entry.result} by {who}"
    if entry.client:
        text += f" from {entry.client}"
    if entry.request_id:
        text += f" [request {entry.request_id}]"
    if entry.detail:
        text += f": {entry.detail}"
    return text


def list_entries(svc: Services, args: argparse.Namespace) -> int:
    found = svc.audit.entries(_query(args))
    if args.json:
        print(json.dumps([e.to_json() for e in found], indent=2))
        return 0
    if not found:
        print("no audit entries match")
    for entry in found:
        print(_line(entry))
    return 0


def prune(svc: Services, args: argparse.Namespace) -> int:
    print(f"removed {svc.audit.prune()} audit entries older than the retention")
    return 0


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", help="24h, 7d, or an ISO 8601 time (UTC)")
    parser.add_argument("--actor", help="part of the actor's name, its kind, or its rule")
    parser.add_argument("--action", help="an action, or a glob such as 'token.*'")
    parser.add_argument("--object", help="part of the object's name")
    parser.add_argument("--limit", type=int, default=100, help="at most this many rows (1000)")
    parser.add_argument("--json", action="store_true")


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    audit = sub.add_parser("audit", parents=[common], help="who did what: the audit log")
    _filters(audit)
    audit.set_defaults(handler=ReadOnly(list_entries))
    audit_sub = audit.add_subparsers(dest="audit_command")
    lst = audit_sub.add_parser("list", parents=[common], help="rows, newest first (default)")
    _filters(lst)
    lst.set_defaults(handler=ReadOnly(list_entries))
    pruned = audit_sub.add_parser(
        "prune", parents=[common], help="remove rows older than audit_retention_days"
    )
    pruned.set_defaults(handler=prune)

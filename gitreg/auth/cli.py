"""`gitreg token ...`, `gitreg namespace ...`, `gitreg secret rotate|generate-key`,
and `gitreg grants`: what the `[[grants]]` table gives a set of groups (docs/sign-in.md)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gitreg.auth.grants import EVERY_NAMESPACE, effective
from gitreg.auth.tokens import Scope
from gitreg.cli_handlers import ReadOnly
from gitreg.services import Services
from gitreg.settings import Settings
from gitreg.storage.sealing import generate_key_file

Parser = argparse.ArgumentParser


def token_create(
    svc: Services, scope: str, namespaces: list[str], expires_in: str, description: str
) -> int:
    made = svc.tokens.create(scope, namespaces, expires_in, description)
    where = ", ".join(namespaces) if namespaces else "every namespace"
    print(f"token #{made.id} ({Scope.parse(scope).name} on {where}); shown once, store it now:")
    print(made.secret)
    return 0


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "never"
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def token_list(svc: Services, as_json: bool) -> int:
    rows: list[dict[str, Any]] = [
        {
            "id": t.id,
            "prefix": t.prefix,
            "scope": t.scope,
            "namespaces": list(t.namespaces),
            "description": t.description,
            "created_at": t.created_at,
            "expires_at": _when(t.expires_at),
            # Tokens from `terraform login` (docs/sign-in.md): whose, and their scopes.
            "owner": t.email or t.subject,
            "groups": list(t.groups),
            "grants": t.grants,
        }
        for t in svc.tokens.active()
    ]
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no tokens; create one with `gitreg token create --scope read --namespace NS`")
    for row in rows:
        namespaces = ",".join(row["namespaces"]) or "*"
        if row["grants"] is not None:
            namespaces = ",".join(f"{ns}:{scope}" for ns, scope in sorted(row["grants"].items()))
        print(
            f"#{row['id']:<4} {row['prefix']}…  {row['scope']:<8} {namespaces:<20}"
            f" expires {row['expires_at']}  {row['description']}"
        )
    return 0


def token_revoke(svc: Services, token_id: int) -> int:
    svc.tokens.revoke(token_id)
    print(f"revoked token #{token_id}")
    return 0


def namespace_set(svc: Services, namespace: str, private: bool) -> int:
    svc.namespaces.set_private(namespace, private)
    print(f"namespace {namespace} is now {'private' if private else 'public'}")
    return 0


def namespace_list(svc: Services) -> int:
    default = "private" if svc.settings.read_default == "token" else "public"
    print(
        f"default for namespaces not listed: {default} (read_default = {svc.settings.read_default})"
    )
    for namespace, private in sorted(svc.namespaces.visibility().items()):
        print(f"{namespace}: {'private' if private else 'public'}")
    return 0


def secret_rotate(svc: Services) -> int:
    svc.access.rotate_signing_key()
    print(
        "rotated the URL signing key; every replica signs with it within seconds, and"
        " URLs signed with the previous key stay valid until expiry"
    )
    return 0


def _generate_key(args: argparse.Namespace, settings: Settings) -> int:
    """Standalone: runs before Services, which would read the key it is making."""
    generate_key_file(args.file)
    print(f"wrote a new secret key to {args.file} (mode 0600); keep a copy somewhere safe:")
    print("without it the secrets sealed in the database cannot be read")
    return 0


def show_grants(settings: Settings, groups: str | None) -> int:
    """Standalone: reads only the config file, so it works before any data dir exists.
    An invalid table already failed in `load_settings`, as it fails `serve`."""
    grants = settings.grants
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
    """Add `token`, `namespace` and `secret` to the CLI; each sets its `handler`."""
    token = sub.add_parser("token", parents=[common], help="API tokens for reading and publishing")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    create = token_sub.add_parser("create", parents=[common], help="create a token (shown once)")
    create.add_argument("--scope", required=True, choices=[s.name for s in Scope])
    create.add_argument(
        "--namespace",
        action="append",
        default=[],
        dest="namespaces",
        help="limit the token to this namespace (repeatable)",
    )
    create.add_argument("--expires-in", default="", help="e.g. 90d, 12h (default: never)")
    create.add_argument("--description", default="")
    create.set_defaults(
        handler=lambda svc, a: token_create(svc, a.scope, a.namespaces, a.expires_in, a.description)
    )
    listing = token_sub.add_parser("list", parents=[common], help="list active tokens")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=ReadOnly(lambda svc, a: token_list(svc, a.json)))
    revoke = token_sub.add_parser("revoke", parents=[common], help="revoke a token by id")
    revoke.add_argument("token_id", type=int)
    revoke.set_defaults(handler=lambda svc, a: token_revoke(svc, a.token_id))

    namespace = sub.add_parser("namespace", parents=[common], help="namespace visibility")
    ns_sub = namespace.add_subparsers(dest="namespace_command", required=True)
    ns_set = ns_sub.add_parser("set", parents=[common], help="make a namespace private or public")
    ns_set.add_argument("namespace")
    visibility = ns_set.add_mutually_exclusive_group(required=True)
    visibility.add_argument("--private", dest="private", action="store_true")
    visibility.add_argument("--public", dest="private", action="store_false")
    ns_set.set_defaults(handler=lambda svc, a: namespace_set(svc, a.namespace, a.private))
    ns_list = ns_sub.add_parser("list", parents=[common], help="list namespace visibility")
    ns_list.set_defaults(handler=ReadOnly(lambda svc, a: namespace_list(svc)))

    secret = sub.add_parser("secret", parents=[common], help="server secrets")
    secret_sub = secret.add_subparsers(dest="secret_command", required=True)
    rotate = secret_sub.add_parser("rotate", parents=[common], help="rotate the URL signing key")
    rotate.set_defaults(handler=lambda svc, a: secret_rotate(svc))
    generate = secret_sub.add_parser(
        "generate-key", parents=[common], help="write a new secret_key_file (32 random bytes)"
    )
    generate.add_argument("file", type=Path)
    generate.set_defaults(standalone=_generate_key)


def register_grants(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: Parser
) -> None:
    """Add `grants` (`standalone`: it needs no registry)."""
    grants = sub.add_parser(
        "grants", parents=[common], help="check [[grants]] and show what groups may do"
    )
    grants.add_argument("--groups", default=None, help="comma-separated IdP group names")
    grants.set_defaults(standalone=lambda a, settings: show_grants(settings, a.groups))

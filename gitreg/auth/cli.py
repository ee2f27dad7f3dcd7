"""`gitreg token ...`, `gitreg namespace ...`, `gitreg secret rotate|generate-key`."""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gitreg.addresses import check_name
from gitreg.auth.signed_urls import rotate_signing_key
from gitreg.auth.tokens import Scope, new_token, parse_duration, token_hash
from gitreg.cli_handlers import ReadOnly
from gitreg.services import Services
from gitreg.settings import Settings
from gitreg.storage.sealing import generate_key_file

Parser = argparse.ArgumentParser


def token_create(
    svc: Services, scope: str, namespaces: list[str], expires_in: str, description: str
) -> int:
    parsed = Scope.parse(scope)
    for namespace in namespaces:
        check_name("namespace", namespace)
    expires_at = time.time() + parse_duration(expires_in) if expires_in else None
    token = new_token()
    token_id = svc.auth.add_token(
        token_hash(token), token[:12], parsed.name, namespaces, description, expires_at
    )
    where = ", ".join(namespaces) if namespaces else "every namespace"
    print(f"token #{token_id} ({parsed.name} on {where}); shown once, store it now:")
    print(token)
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
        for t in svc.auth.tokens()
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
    svc.auth.revoke(token_id)
    print(f"revoked token #{token_id}")
    return 0


def namespace_set(svc: Services, namespace: str, private: bool) -> int:
    check_name("namespace", namespace)
    svc.auth.set_namespace_private(namespace, private)
    print(f"namespace {namespace} is now {'private' if private else 'public'}")
    return 0


def namespace_list(svc: Services) -> int:
    default = "private" if svc.settings.read_default == "token" else "public"
    print(
        f"default for namespaces not listed: {default} (read_default = {svc.settings.read_default})"
    )
    for namespace, private in sorted(svc.auth.namespace_visibility().items()):
        print(f"{namespace}: {'private' if private else 'public'}")
    return 0


def secret_rotate(svc: Services) -> int:
    rotate_signing_key(svc.secrets)
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

"""`gitreg provider publish|sync|yank|unyank`, `gitreg providers`, `gitreg key ...`, `gitreg keys`,
and `gitreg repo add URL --provider NS/TYPE` (docs/providers.md)."""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitreg.addresses import check_provider_namespace, parse_local_provider_address
from gitreg.cli_handlers import ReadOnly, add_yank_pair, report_yank
from gitreg.errors import BadRequest, RemoteError
from gitreg.providers.collect import collect
from gitreg.providers.keys import ALGORITHMS
from gitreg.providers.names import check_version
from gitreg.providers.outcomes import ProviderSyncResult
from gitreg.providers.service import KeyUse, ProviderSummary, RepoSync, VersionSummary
from gitreg.providers.store import ProviderVersionRecord
from gitreg.repositories.service import RepoSource
from gitreg.services import Services
from gitreg.settings import Settings
from gitreg.versions import latest

if TYPE_CHECKING:  # imported by the upload: every command's parser, `serve`'s
    # too, loads this module, and a serving worker need not carry httpx
    # (its memory budget: docs/performance.md)
    import httpx

Parser = argparse.ArgumentParser
UPLOAD_TIMEOUT = 300.0


# -- registering repositories ---------------------------------------------------


def repo_add_provider(svc: Services, args: argparse.Namespace) -> int:
    """`gitreg repo add URL --provider NS/TYPE [--forge NAME] [--sign]`."""
    source = RepoSource(args.url, args.forge_repo, args.webhook_secret)
    added = svc.repositories.add_provider(source, args.provider, args.forge or "", args.sign)
    link, repo = added.link, added.repo
    print(
        f"registered provider {link.namespace}/{link.type} from {link.forge} releases"
        f" of {repo.forge_repo}"
    )
    if args.no_sync:
        return 0
    address = parse_local_provider_address(f"{link.namespace}/{link.type}")
    return _print_sync(svc.providers.sync_releases(address))


def _print_sync(synced: Iterable[RepoSync]) -> int:
    failed = 0
    for repo in synced:
        if repo.pending:
            print(f"pending   {repo.pending} (retried by the next sync)")
        elif repo.error:
            print(f"gitreg: {repo.url}: {repo.error}", file=sys.stderr)
            failed += 1
        elif repo.result is not None:
            _print_outcomes(repo.result)
    return 1 if failed else 0


def _print_outcomes(result: ProviderSyncResult) -> None:
    for outcome in result.outcomes:
        print(f"{outcome.status:<9} {outcome.provider} {outcome.tag} {outcome.message}".rstrip())
    print(result.summary())


def provider_sync(svc: Services, args: argparse.Namespace) -> int:
    address = parse_local_provider_address(args.provider) if args.provider else None
    if args.tag:
        for outcome in svc.providers.ingest_tag(address, args.tag):
            print(outcome.line())
        return 0
    return _print_sync(svc.providers.sync_releases(address))


# -- publishing a directory -------------------------------------------------------


def _dist_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise BadRequest(f"{directory} is not a directory")
    return [p for p in sorted(directory.iterdir()) if p.is_file()]


def provider_publish_local(svc: Services, args: argparse.Namespace) -> int:
    address = parse_local_provider_address(args.provider)
    result = svc.providers.publish_files(
        address, args.version, _dist_files(args.dir), sign=args.sign
    )
    _print_published(result.to_json())
    return 0


def _print_published(result: dict[str, Any]) -> None:
    verb = "published" if result["status"] == "published" else "unchanged"
    print(
        f"{verb} {result['provider']} {result['version']} ({', '.join(result['platforms'])});"
        f" SHA256SUMS signed by {result['signed_by']} key {result['key_id']}"
    )


def _raise_for(answer: httpx.Response, what: str) -> None:
    if answer.is_success:
        return
    try:
        errors = answer.json().get("errors") or [answer.text[:300]]
    except ValueError:
        errors = [answer.text[:300]]
    raise RemoteError(f"{what}: {answer.status_code}: {'; '.join(str(e) for e in errors)}")


def provider_publish_remote(args: argparse.Namespace) -> int:
    """Upload a dist/ directory to a running registry: one PUT per file, then publish."""
    import httpx

    address = parse_local_provider_address(args.provider)
    version = check_version(args.version)
    token = args.token or os.environ.get("GITREG_TOKEN", "")
    if not token:
        raise BadRequest("uploading needs a publish token: --token or $GITREG_TOKEN")
    files = collect(_dist_files(args.dir), address.type, version, strict=False)
    paths = [p for p in (*files.zips.values(), files.shasums, files.signature, files.manifest) if p]
    verify: ssl.SSLContext | bool = True
    if args.ca_file:
        verify = ssl.create_default_context(cafile=str(args.ca_file))
    base = f"{args.url.rstrip('/')}/api/v1/providers/{address.namespace}/{address.type}/{version}"
    with httpx.Client(
        headers={"Authorization": f"Bearer {token}"},
        verify=verify,
        timeout=httpx.Timeout(UPLOAD_TIMEOUT, connect=15.0),
    ) as client:
        try:
            created = client.post(f"{base}/uploads")
            _raise_for(created, "creating the upload")
            upload = f"{base}/uploads/{created.json()['upload_id']}"
            for path in paths:
                with path.open("rb") as body:
                    _raise_for(client.put(f"{upload}/{path.name}", content=body), path.name)
            answer = client.post(f"{upload}/publish", json={"sign": args.sign})
            _raise_for(answer, "publishing")
        except httpx.HTTPError as exc:
            raise RemoteError(f"cannot reach {args.url}: {exc}") from exc
    _print_published(answer.json())
    return 0


def _publish_standalone(args: argparse.Namespace, settings: Settings) -> int | None:
    """With --url the upload needs no local data dir; otherwise publish locally."""
    return provider_publish_remote(args) if args.url else None


# -- listing ----------------------------------------------------------------------


def _version_row(summary: VersionSummary) -> dict[str, Any]:
    v = summary.version
    return {
        "version": v.version,
        "protocols": list(v.protocols),
        "key_id": summary.key_id,
        "signed_by": v.signed_by,
        "source": v.source,
        "published_at": v.published_at,
        "yanked": v.yanked,
        "packages": [
            {
                "platform": f"{p.os}_{p.arch}",
                "filename": p.filename,
                "size": p.size,
                "hashes": [p.h1, f"zh:{p.sha256}"],
            }
            for p in summary.packages
        ],
    }


def _provider_row(summary: ProviderSummary) -> dict[str, Any]:
    provider, repo = summary.provider, summary.repo
    return {
        "provider": provider.address,
        "repository": repo.url if repo else None,
        "forge": provider.forge,
        "forge_repo": repo.forge_repo if repo else None,
        "sign_releases": provider.sign_releases,
        "latest": chosen.version if (chosen := _latest(summary.versions)) else None,
        "versions": [_version_row(v) for v in summary.versions],
        "last_sync_at": provider.last_sync_at,
        "last_sync": json.loads(provider.last_sync_report),
    }


def _latest(versions: Sequence[VersionSummary]) -> ProviderVersionRecord | None:
    chosen = latest(versions, lambda v: v.version.version, lambda v: v.version.yanked)
    return chosen.version if chosen is not None else None


def providers_list(svc: Services, args: argparse.Namespace) -> int:
    rows = [_provider_row(summary) for summary in svc.providers.providers()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no providers; see `gitreg repo add URL --provider NS/TYPE` or `gitreg provider`")
        return 0
    for row in rows:
        source = f"{row['forge']}:{row['forge_repo']}" if row["forge"] else "uploads"
        print(f"{row['provider']}  ({source})")
        for v in row["versions"]:
            platforms = ", ".join(p["platform"] for p in v["packages"])
            marks = ["latest"] * (v["version"] == row["latest"]) + ["yanked"] * v["yanked"]
            shown = f" ({', '.join(marks)})" if marks else ""
            print(f"  {v['version']}{shown}  [{platforms}]  key {v['key_id']} ({v['signed_by']})")
            for p in v["packages"]:
                print(f"    {p['platform']:<16} {p['hashes'][0]}  {p['hashes'][1]}")
        if args.verbose:
            for line in row["last_sync"]:
                print(f"  last sync: {line}")
    return 0


# -- keys -------------------------------------------------------------------------


def _algorithms(per_packet: Sequence[str]) -> str:
    """A key's algorithms, each named once, the primary key's first: a key has
    one per packet, and a generated key's three packets are all rsa3072."""
    return ", ".join(dict.fromkeys(per_packet))


def key_add(svc: Services, args: argparse.Namespace) -> int:
    namespace = check_provider_namespace(args.namespace)
    try:
        data = Path(args.file).read_bytes()
    except OSError as exc:
        raise BadRequest(f"cannot read {args.file}: {exc.strerror}") from exc
    registered = svc.providers.register_key(namespace, data)
    key = registered.key
    verb = "registered" if registered.created else "already registered:"
    print(f"{verb} key {key.key_id} ({_algorithms(key.algorithms)}) for namespace {namespace}")
    for warning in registered.warnings:
        print(f"gitreg: warning: {warning}", file=sys.stderr)
    return 0


def key_generate(svc: Services, args: argparse.Namespace) -> int:
    namespace = check_provider_namespace(args.namespace)
    generated = svc.providers.generate_key(namespace, args.algorithm)
    key = generated.key
    print(f"generated key {key.key_id} ({_algorithms(key.algorithms)}) for namespace {namespace}")
    print(f"secret key: {generated.secret_location} (readable by this user only)")
    return 0


def key_retire(svc: Services, args: argparse.Namespace) -> int:
    namespace = check_provider_namespace(args.namespace)
    retired = svc.providers.retire_key(namespace, args.key_id)
    print(
        f"retired key {retired.key.key_id} of {namespace}: it signs and verifies nothing new;"
        f" the {retired.versions_signed} version(s) it signed keep serving it"
    )
    return 0


def key_export(svc: Services, args: argparse.Namespace) -> int:
    print(svc.providers.export_key(args.namespace, args.key_id), end="")
    return 0


def _key_row(use: KeyUse) -> dict[str, Any]:
    k = use.key
    return {
        "namespace": k.namespace,
        "key_id": k.key_id,
        "fingerprint": k.fingerprint,
        "algorithms": list(k.algorithms),
        "origin": k.origin,
        "terraform_compatible": k.terraform_compatible,
        "created_at": k.created_at,
        "retired_at": k.retired_at,
        "versions_signed": use.versions_signed,
    }


def keys_list(svc: Services, args: argparse.Namespace) -> int:
    rows = [_key_row(use) for use in svc.providers.keys(args.namespace)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no keys; `gitreg key add NS public.asc` or `gitreg key generate NS`")
    for row in rows:
        state = f"retired {row['retired_at']}" if row["retired_at"] else "active"
        compat = "" if row["terraform_compatible"] else "  NOT VERIFIABLE BY TERRAFORM 1.0.x"
        print(
            f"{row['namespace']}  {row['key_id']}  {row['origin']:<10} {state:<8}"
            f"  {row['versions_signed']} version(s)  {_algorithms(row['algorithms'])}{compat}"
        )
    return 0


# -- parsers ----------------------------------------------------------------------


def add_repo_options(add: Parser) -> None:
    """`repo add` options for provider repositories (its parser is in gitreg.repositories.cli)."""
    add.add_argument(
        "--forge",
        default="",
        help="forge whose releases feed a --provider (github, gitlab or a [forges.NAME] table)",
    )
    add.add_argument(
        "--sign",
        action="store_true",
        help="with --provider: gitreg signs SHA256SUMS of releases that come without .sig",
    )


def register(
    sub: Any, common: Parser, more_key_commands: Callable[[Any, Parser], None] | None = None
) -> None:
    """Add `provider`, `providers`, `key` and `keys`; each sets `handler(svc, args)`.
    `more_key_commands` adds other features' subcommands under `key`."""
    provider = sub.add_parser("provider", parents=[common], help="publish providers")
    provider_sub = provider.add_subparsers(dest="provider_command", required=True)
    publish = provider_sub.add_parser(
        "publish", parents=[common], help="publish a goreleaser dist/ directory (or just zips)"
    )
    publish.add_argument("provider", metavar="NAMESPACE/TYPE")
    publish.add_argument("version", metavar="VERSION")
    publish.add_argument("dir", type=Path, metavar="DIR")
    publish.add_argument(
        "--sign", action="store_true", help="gitreg signs SHA256SUMS with the namespace's key"
    )
    publish.add_argument("--url", help="upload to this registry instead of the local data dir")
    publish.add_argument("--token", help="publish token for --url (default: $GITREG_TOKEN)")
    publish.add_argument("--ca-file", type=Path, help="CA bundle to trust for --url")
    publish.set_defaults(handler=provider_publish_local, standalone=_publish_standalone)
    sync = provider_sub.add_parser("sync", parents=[common], help="read forge releases now")
    sync.add_argument("provider", nargs="?", metavar="NAMESPACE/TYPE")
    sync.add_argument("--tag", help="only this release's tag")
    sync.set_defaults(handler=provider_sync)
    add_yank_pair(provider_sub, common, "NAMESPACE/TYPE", "provider", _provider_yank)

    listing = sub.add_parser("providers", parents=[common], help="list providers and hashes")
    listing.add_argument("--json", action="store_true")
    listing.add_argument("--verbose", "-v", action="store_true")
    listing.set_defaults(handler=ReadOnly(providers_list))

    key = sub.add_parser("key", parents=[common], help="provider and attestation signing keys")
    key_sub = key.add_subparsers(dest="key_command", required=True)
    if more_key_commands is not None:
        more_key_commands(key_sub, common)
    add = key_sub.add_parser("add", parents=[common], help="register a publisher's public key")
    add.add_argument("namespace")
    add.add_argument("file", type=Path, metavar="PUBLIC_KEY.asc")
    add.set_defaults(handler=key_add)
    generate = key_sub.add_parser(
        "generate", parents=[common], help="create a key gitreg signs with"
    )
    generate.add_argument("namespace")
    generate.add_argument(
        "--algorithm", default="rsa3072", help=f"one of {', '.join(ALGORITHMS)} (default rsa3072)"
    )
    generate.set_defaults(handler=key_generate)
    retire = key_sub.add_parser(
        "retire", parents=[common], help="stop using a key for new versions"
    )
    retire.add_argument("namespace")
    retire.add_argument("key_id", metavar="KEY_ID")
    retire.set_defaults(handler=key_retire)
    export = key_sub.add_parser("export", parents=[common], help="print a public key")
    export.add_argument("namespace")
    export.add_argument("key_id", nargs="?", metavar="KEY_ID")
    export.set_defaults(handler=ReadOnly(key_export))
    keys = sub.add_parser("keys", parents=[common], help="list provider signing keys")
    keys.add_argument("namespace", nargs="?")
    keys.add_argument("--json", action="store_true")
    keys.set_defaults(handler=ReadOnly(keys_list))


# A yanked provider version leaves `/v1/providers/.../versions` and the mirror's
# `index.json`, but its files stay served by exact version.
PROVIDER_YANKED = (
    "hidden from version lists: Terraform no longer installs it, lock files"
    " pinning it included; its files stay served by exact version"
)


def _provider_yank(svc: Services, address: str, version: str, yanked: bool) -> int:
    done = svc.providers.set_yanked(parse_local_provider_address(address), version, yanked)
    report_yank(f"provider {done.address}", done.version, yanked, done.changed, PROVIDER_YANKED)
    return 0

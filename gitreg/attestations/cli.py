"""`gitreg key attestation rotate|list`: the registry's attestation keys
(docs/verify.md). Rotation is logged; retired keys stay listed."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gitreg.cli_handlers import ReadOnly
from gitreg.services import Services


def rotate(svc: Services, args: argparse.Namespace) -> int:
    fresh = svc.attestations.rotate_key()
    print(
        f"the attestation key is now {fresh.keyid}; earlier keys stay listed as retired,"
        " so statements they signed still verify"
    )
    return 0


def listing(svc: Services, args: argparse.Namespace) -> int:
    keys = svc.attestations.keys_document()["keys"]
    if args.json:
        print(json.dumps(keys, indent=2))
        return 0
    for key in keys:
        print(f"{key['keyid']}  {key['algorithm']}  {key['status']}  created {key['created']}")
    return 0


def register_key_commands(key_sub: Any, common: argparse.ArgumentParser) -> None:
    attestation = key_sub.add_parser(
        "attestation", parents=[common], help="the key that signs statements and the log"
    )
    actions = attestation.add_subparsers(dest="attestation_command", required=True)
    actions.add_parser(
        "rotate", parents=[common], help="sign with a new key from now on"
    ).set_defaults(handler=rotate)
    shown = actions.add_parser("list", parents=[common], help="list the keys, current first")
    shown.add_argument("--json", action="store_true")
    shown.set_defaults(handler=ReadOnly(listing))

"""`gitreg oci zips`: build the OCI zip layer of every module version that has
none yet, ahead of the first pull (docs/oci.md)."""

from __future__ import annotations

import argparse
from typing import Any

from gitreg.services import Services


def zips(svc: Services) -> int:
    done = svc.oci.build_module_zips()
    print(
        f"oci zips: {done.built} built, {done.present} already built, {done.failed} failed"
        + (" (see the log; run again to retry)" if done.failed else "")
    )
    return 1 if done.failed else 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    oci = sub.add_parser("oci", parents=[common], help="the OCI view of releases (/v2/)")
    oci_sub = oci.add_subparsers(dest="oci_command", required=True)
    build = oci_sub.add_parser(
        "zips",
        parents=[common],
        help="build the zip layer of every module version that has none yet (resumable)",
    )
    build.set_defaults(handler=lambda svc, a: zips(svc))

"""`gitreg doctor`: one line per check, non-zero exit when one FAILs.

It runs standalone, and opens gitreg's storage (`build_services`) only when
the checks say that changes nothing: opening the index would migrate an older
schema or refuse a newer one, and the schema is one of the things this command
reports on.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gitreg.doctor.service import CheckResult, Stored, run_checks
from gitreg.services import build_services
from gitreg.settings import Settings


def exit_code(results: list[CheckResult]) -> int:
    """2 for unknown settings, as every other command exits for them; else 1
    when any check FAILs. Warnings are for a human to judge, so they keep 0."""
    if any(r.check == "settings" and r.status == "FAIL" for r in results):
        return 2
    return 1 if any(r.status == "FAIL" for r in results) else 0


def _read_stored(settings: Settings) -> Stored:
    svc = build_services(settings)
    try:
        return Stored(svc.repositories.repos(), svc.providers.active_keys())
    finally:
        svc.close()


def doctor(settings: Settings, as_json: bool, timeout: float) -> int:
    results = run_checks(settings, lambda: _read_stored(settings), timeout)
    code = exit_code(results)
    if as_json:
        document = {"ok": code == 0, "checks": [r.as_dict() for r in results]}
        print(json.dumps(document, indent=2))
    else:
        for result in results:
            print(result.line())
    return code


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `doctor`; it sets `standalone(args, settings)`."""
    parser = sub.add_parser(
        "doctor", parents=[common], help="check the configuration and what it depends on"
    )
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        help="seconds for each network check (public_url, upstreams, remotes)",
    )
    # The flags `serve` takes that change what is checked, so the doctor can be
    # asked about the command line a service runs with.
    parser.add_argument("--public-url", help="URL Terraform users reach gitreg at")
    parser.add_argument("--tls-cert", type=Path, help="the certificate `serve` is given")
    parser.add_argument("--tls-key", type=Path, help="its key (goes with --tls-cert)")
    parser.add_argument("--no-tls", action="store_true", default=None, help="TLS ends at a proxy")
    # Unknown settings stop every other command at load; the doctor lists them.
    parser.set_defaults(
        standalone=lambda a, s: doctor(s, a.json, a.timeout), lists_unknown_settings=True
    )

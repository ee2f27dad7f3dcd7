"""`gitreg module deprecate|undeprecate` (issue 14).

Unlike a yank (gitreg/modules/cli_yank.py), a deprecated version stays in the
version lists and installs as before. Its entry in `/v1/modules/.../versions`
carries `"deprecation": {"reason": ..., "link": ...}`, the per-version shape of
HashiCorp's registry clients (go-slug sourcebundle's
ModulePackageVersionDeprecation); the browse API and the web UI show it too.
What each Terraform version does with it is in docs/modules.md. The write is an
ordinary index write: serving processes notice it as they notice a publish;
this process's cache is cleared directly, as `yank` does.
"""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import urlsplit

from gitreg.addresses import parse_module_address
from gitreg.errors import BadRequest, NotFound
from gitreg.services import Services
from gitreg.storage.records import ModuleRecord, VersionRecord
from gitreg.versions import parse_tag_version

Parser = argparse.ArgumentParser

# A reason is one short notice shown in terminals and on the module page.
MAX_REASON = 1000
MAX_LINK = 2000


def _check_reason(reason: str) -> str:
    reason = reason.strip()
    if not reason:
        raise BadRequest("--reason must say why the version is deprecated")
    if len(reason) > MAX_REASON:
        raise BadRequest(f"--reason is longer than {MAX_REASON} characters")
    if any(ord(c) < 32 and c not in "\n\t" for c in reason):
        raise BadRequest("--reason must not contain control characters")
    return reason


def _check_link(link: str) -> str:
    """An absolute http(s) URL: it becomes an `href` on the module page, so a
    `javascript:` or relative link is refused here, not only escaped there."""
    parts = urlsplit(link)
    if parts.scheme not in ("https", "http") or not parts.netloc or len(link) > MAX_LINK:
        raise BadRequest(f"--link must be an absolute https:// or http:// URL, not {link!r}")
    if any(ord(c) <= 32 for c in link):
        raise BadRequest("--link must not contain spaces or control characters")
    return link


def find_version(
    svc: Services, address: str, version: str
) -> tuple[ModuleRecord, str, VersionRecord]:
    """A module version named on the command line, with its version key (no
    build metadata); `yank` and `deprecate` both find theirs here."""
    parsed = parse_module_address(address)
    key = str(parse_tag_version(version).without_build())  # NotAVersion is a BadRequest
    module = svc.index.find_module(parsed.namespace, parsed.name, parsed.system)
    if module is None:
        raise NotFound(f"module {parsed} is not registered")
    found = svc.index.version_by_key(module.id, key)
    if found is None:
        raise NotFound(f"module {module.address} has no version {version}")
    return module, key, found


def module_deprecate(svc: Services, address: str, version: str, reason: str, link: str) -> int:
    reason = _check_reason(reason)
    link = _check_link(link) if link else ""
    module, key, found = find_version(svc, address, version)
    what = f"module {module.address} {found.version}"
    if (found.deprecation_reason, found.deprecation_link) == (reason, link):
        print(f"{what} was already deprecated with this reason; nothing changed")
        return 0
    svc.index.set_deprecation(module.id, key, reason, link)
    svc.cache.invalidate()
    verb = "deprecation updated for" if found.deprecated else "deprecated"
    print(f"{verb} {what}: still listed and installable; its version-list entry carries the reason")
    return 0


def module_undeprecate(svc: Services, address: str, version: str) -> int:
    module, key, found = find_version(svc, address, version)
    what = f"module {module.address} {found.version}"
    if not found.deprecated:
        print(f"{what} is not deprecated; nothing changed")
        return 0
    svc.index.set_deprecation(module.id, key, None)
    svc.cache.invalidate()
    print(f"undeprecated {what}: its deprecation notice is gone")
    return 0


def register(module_sub: Any, common: Parser) -> None:
    """Add `deprecate|undeprecate` to the `module` group of gitreg.modules.cli_yank."""
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

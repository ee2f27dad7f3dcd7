"""The HCL a reader copies into their configuration.

Module sources and provider sources name this registry's host as Terraform
users write it (module-registry-protocol.md, "Module Addresses":
`HOSTNAME/NAMESPACE/NAME/SYSTEM`), from the same public URL the API builds
download locations from (gitreg/api/urls.py). The constraint is
`~> MAJOR.MINOR`, which accepts later patches and minors of the same major
(TERRAFORM-CLIENT.md). A prerelease is written as an exact version, since
Terraform selects a prerelease only when it is named exactly.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any
from urllib.parse import urlsplit

from gitreg.errors import BadRequest
from gitreg.versions import parse_version

_LABEL = re.compile(r"[^A-Za-z0-9_-]")
# Placeholders that parse as the declared type, so the pasted block is valid HCL.
_PLACEHOLDERS = (
    ("string", '""'),
    ("number", "0"),
    ("bool", "false"),
    ("list", "[]"),
    ("set", "[]"),
    ("tuple", "[]"),
    ("map", "{}"),
    ("object", "{}"),
)


def host_of(base_url: str) -> str:
    """`https://registry.example.com:8443` -> `registry.example.com:8443`."""
    return urlsplit(base_url).netloc


def constraint(version: str) -> str:
    try:
        parsed = parse_version(version)
    except BadRequest:
        return version
    if parsed.prerelease:
        return str(parsed)
    return f"~> {parsed.major}.{parsed.minor}"


def _placeholder(type_: str) -> str:
    compact = type_.replace(" ", "").lower()
    for prefix, value in _PLACEHOLDERS:
        if compact.startswith(prefix):
            return value
    return "null"


def _comment(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= 60 else one_line[:57] + "..."


def module_snippet(
    host: str, record: dict[str, Any], nested: dict[str, Any] | None = None, yanked: bool = False
) -> str:
    """The module block for `record`'s version, or for one of its submodules
    (`nested`, sourced with `//modules/NAME`). A yanked version is pinned
    exactly: a constraint would never select it."""
    name = posixpath.basename(nested["path"]) if nested else record["name"]
    label = _LABEL.sub("_", name) or "module"
    if label[0].isdigit() or label[0] == "-":
        label = "m_" + label
    source = f"{host}/{record['namespace']}/{record['name']}/{record['provider']}"
    if nested:
        source += f"//{nested['path']}"
    version = record["version"] if yanked else constraint(record["version"])
    lines = [
        f'module "{label}" {{',
        f'  source  = "{source}"',
        f'  version = "{version}"',
    ]
    required = [i for i in (nested or record["root"])["inputs"] if i.get("required")]
    if required:
        lines.append("")
        width = max(len(i["name"]) for i in required)
        for item in required:
            about = _comment(item.get("type") or "any")
            value = _placeholder(item.get("type", ""))
            lines.append(f"  {item['name']:<{width}} = {value} # required, {about}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def provider_snippet(host: str, namespace: str, type_: str, version: str) -> str:
    return (
        "terraform {\n"
        "  required_providers {\n"
        f"    {type_} = {{\n"
        f'      source  = "{host}/{namespace}/{type_}"\n'
        f'      version = "{constraint(version)}"\n'
        "    }\n"
        "  }\n"
        "}\n"
    )

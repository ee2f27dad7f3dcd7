"""The registry token Terraform itself would send to a host.

Terraform looks, for a host, at the CLI configuration's `credentials "HOST"`
blocks (`TF_CLI_CONFIG_FILE`, else `~/.terraformrc`), then at
`credentials.tfrc.json` in its configuration directory (`~/.terraform.d`,
where `terraform login` saves tokens), then at the environment:
`TF_TOKEN_<host>`, the host's dots written `_` and its dashes `__`
(a variable cannot name a port). The first that has the host wins.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path


def _unquote(text: object) -> str:
    value = str(text)
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def _from_cli_config(path: Path) -> dict[str, str]:
    try:
        text = path.read_text("utf-8")
    except OSError:
        return {}
    if text.lstrip().startswith("{"):
        try:
            blocks = json.loads(text).get("credentials", {})
        except (ValueError, AttributeError):
            return {}
        return _tokens(blocks)
    import hcl2

    try:
        parsed = hcl2.loads(text)
    except Exception:  # a config Terraform could not read either gives no token
        return {}
    found: dict[str, str] = {}
    for block in parsed.get("credentials", []):
        for host, body in block.items():
            if isinstance(body, dict) and "token" in body:
                found.setdefault(_unquote(host).lower(), _unquote(body["token"]))
    return found


def _tokens(blocks: object) -> dict[str, str]:
    found: dict[str, str] = {}
    if isinstance(blocks, dict):
        for host, body in blocks.items():
            if isinstance(body, dict) and isinstance(body.get("token"), str):
                found[str(host).lower()] = body["token"]
    return found


def _from_env(environ: Mapping[str, str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, value in environ.items():
        if name.startswith("TF_TOKEN_") and value:
            encoded = name.removeprefix("TF_TOKEN_")
            host = encoded.replace("__", "\0").replace("_", ".").replace("\0", "-")
            found[host.lower()] = value
    return found


def token_for(host: str, environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME", str(Path.home())))
    config = (
        Path(env["TF_CLI_CONFIG_FILE"]) if env.get("TF_CLI_CONFIG_FILE") else home / ".terraformrc"
    )
    config_dir = (
        Path(env["TF_CLI_CONFIG_DIR"]) if env.get("TF_CLI_CONFIG_DIR") else home / ".terraform.d"
    )
    try:
        stored = json.loads((config_dir / "credentials.tfrc.json").read_text("utf-8"))
        from_file = _tokens(stored.get("credentials"))
    except (OSError, ValueError, AttributeError):
        from_file = {}
    key = host.lower()
    for source in (_from_cli_config(config), from_file, _from_env(env)):
        if key in source:
            return source[key]
    return None

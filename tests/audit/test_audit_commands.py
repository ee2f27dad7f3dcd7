"""Operators' commands are audit rows naming the operator, and `gitreg audit`
lists and filters them (the commands run in process, on a real data dir)."""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any

from tests.support.gitrepo import GitRepo, simple_module
from tests.support.server import cli


def _audit(data_dir: Path, *args: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(cli(data_dir, "audit", "--json", *args).stdout)
    return rows


def test_each_command_is_one_row_naming_the_operator(tmp_path: Path) -> None:
    data = tmp_path / "data"
    repo = GitRepo(tmp_path / "vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    cli(data, "repo", "add", str(repo.path), "--module", "acme/vpc/aws")
    cli(data, "module", "yank", "acme/vpc/aws", "1.0.0")
    cli(data, "module", "deprecate", "acme/vpc/aws", "1.0.0", "--reason", "use 2.x")
    cli(data, "namespace", "set", "acme", "--private")
    made = cli(data, "token", "create", "--scope", "read", "--namespace", "acme").stdout
    token_id = made.split("#")[1].split()[0]
    cli(data, "token", "revoke", token_id)
    refused = cli(data, "token", "revoke", "999", check=False)
    assert refused.returncode != 0
    rows = _audit(data)
    assert [(r["action"], r["result"]) for r in reversed(rows)] == [
        ("repository.add", "ok"),
        ("module.publish", "ok"),
        ("module.yank", "ok"),
        ("module.deprecate", "ok"),
        ("namespace.visibility", "ok"),
        ("token.create", "ok"),
        ("token.revoke", "ok"),
        ("token.revoke", "failed"),
    ]
    operator = {"kind": "operator", "name": getpass.getuser(), "rule": ""}
    assert all(r["actor"] == operator and r["client"] == "cli" for r in rows)
    assert rows[0]["object"] == "token #999"
    by_action = {r["action"]: r for r in rows}
    assert by_action["module.publish"]["object"] == "acme/vpc/aws 1.0.0"
    assert by_action["module.publish"]["detail"] == "tag v1.0.0"
    assert by_action["module.deprecate"]["detail"] == "use 2.x"
    assert by_action["namespace.visibility"]["detail"] == "private"
    assert [r["action"] for r in _audit(data, "--action", "module.*", "--object", "VPC")] == [
        "module.deprecate",
        "module.yank",
        "module.publish",
    ]
    text = cli(data, "audit", "--since", "1h", "--action", "token.create").stdout
    assert text.count("\n") == 1 and " token.create token gitreg_" in text
    assert "by operator " in text and "read on acme" in text
    bad = cli(data, "audit", "--since", "last week", check=False)
    assert bad.returncode == 2 and "since must look like" in bad.stderr


def test_a_limit_below_one_is_a_usage_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    cli(data, "namespace", "set", "acme", "--private")
    done = cli(data, "audit", "--limit", "0", check=False)
    assert done.returncode == 2
    assert "gitreg: error: --limit must be a positive number" in done.stderr

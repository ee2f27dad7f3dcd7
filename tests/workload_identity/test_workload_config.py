"""The `[[workload_identity]]` tables (gitreg/workload_identity/config.py):
anything gitreg would not read as written stops it at start."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from gitreg.auth.tokens import Scope
from gitreg.errors import ConfigError
from gitreg.settings import Settings, load_settings
from gitreg.workload_identity.config import parse_workload_identity
from tests.support.server import cli

ENTRY = """
[[workload_identity]]
issuer = "https://token.actions.githubusercontent.com"
audience = "https://registry.example.com"

[[workload_identity.rules]]
claims = { repository = "acme/provider-ourcloud", ref = "refs/tags/*" }
namespace = "Acme"
scope = "publish"
"""


def _settings(tmp_path: Path, text: str) -> Settings:
    (tmp_path / "gitreg.toml").write_text(text)
    return load_settings({"data_dir": tmp_path}, {}, tmp_path / "gitreg.toml")


def test_the_issue_example_parses(tmp_path: Path) -> None:
    (trusted,) = _settings(tmp_path, ENTRY).workload_identity
    assert trusted.issuer == "https://token.actions.githubusercontent.com"
    assert trusted.audience == "https://registry.example.com"
    (rule,) = trusted.rules
    assert rule.claims == (("repository", ("acme/provider-ourcloud",)), ("ref", ("refs/tags/*",)))
    assert (rule.namespace, rule.scope, rule.label) == (
        "acme",
        Scope.publish,
        "workload_identity[1].rules[1]",
    )


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (ENTRY.replace('audience = "', 'audiences = "'), "workload_identity.audiences"),
        (ENTRY.replace("scope = ", "scopes = "), "workload_identity.rules.scopes"),
    ],
)
def test_an_unknown_key_stops_every_command(tmp_path: Path, text: str, named: str) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "gitreg.toml").write_text(text)
    result = cli(data_dir, "audit", check=False)
    assert result.returncode == 2
    assert f"gitreg: error: unknown setting '{named}'" in result.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (ENTRY.replace("claims = { repository", "# claims = { repository"), "claims must"),
        (
            ENTRY.replace('{ repository = "acme/provider-ourcloud", ref = "refs/tags/*" }', "{}"),
            "claims must",
        ),
        (ENTRY.replace("https://token", "http://token"), "issuer must be an https URL"),
        (ENTRY.replace('audience = "https://registry.example.com"', ""), "audience must"),
        (ENTRY.replace('"publish"', '"owner"'), "scope must be"),
        (ENTRY.split("[[workload_identity.rules]]")[0], "at least one"),
        (ENTRY + ENTRY.split("[[workload_identity.rules]]")[0], "listed twice"),
    ],
    ids=["no-claims", "empty-claims", "http", "no-audience", "scope", "no-rules", "twice"],
)
def test_an_entry_gitreg_cannot_use_is_refused(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        _settings(tmp_path, text)
    assert refused.value.user_input  # exit 2
    with pytest.raises(ConfigError, match=message):  # the parser called on its own
        parse_workload_identity(tomllib.loads(text)["workload_identity"])


def test_a_bad_table_stops_every_command_that_opens_the_registry(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "gitreg.toml").write_text(ENTRY.replace('"publish"', '"owner"'))
    result = cli(data_dir, "namespace", "set", "acme", "--private", check=False)
    assert result.returncode == 2
    assert "gitreg: error: workload_identity[1].rules[1]: scope must be" in result.stderr


def test_a_missing_ca_file_is_one_error_line(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    entry = ENTRY.replace('audience = "', 'ca_file = "/nonexistent/ca.pem"\naudience = "')
    (data_dir / "gitreg.toml").write_text(entry)
    result = cli(data_dir, "namespace", "set", "acme", "--private", check=False)
    assert result.returncode == 1
    assert result.stderr.startswith("gitreg: error: workload_identity issuer https://token")
    assert "ca_file" in result.stderr and "Traceback" not in result.stderr

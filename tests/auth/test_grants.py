"""`[[grants]]`: group -> namespace permissions, and `gitreg grants`."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitreg.auth.grants import Grant, effective, parse_grants
from gitreg.auth.tokens import Principal, Scope
from gitreg.errors import ConfigError
from tests.support.server import cli

TABLE = """
[[grants]]
group = "platform-team"
namespace = "Platform"
scope = "publish"

[[grants]]
group = "platform-team"
namespace = "*"
scope = "read"

[[grants]]
group = "sre"
namespace = "platform"
scope = "read"

[[grants]]
group = "admins"
namespace = "*"
scope = "admin"
"""


def _grants() -> tuple[Grant, ...]:
    return (
        Grant("platform-team", "platform", Scope.publish),
        Grant("platform-team", "*", Scope.read),
        Grant("sre", "platform", Scope.read),
        Grant("admins", "*", Scope.admin),
    )


def test_the_highest_scope_per_namespace_wins() -> None:
    assert effective(_grants(), ["platform-team", "sre"]) == {
        "platform": Scope.publish,
        "*": Scope.read,
    }
    # A namespace grant no stronger than the "*" one adds nothing.
    assert effective(_grants(), ["sre", "admins"]) == {"*": Scope.admin}
    assert effective(_grants(), ["Platform-Team", "other"]) == {}  # exact names only
    assert effective(_grants(), []) == {}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([{"group": "", "namespace": "a", "scope": "read"}], "group must be a non-empty"),
        ([{"group": "g", "namespace": " ", "scope": "read"}], "namespace must be a non-empty"),
        ([{"group": "g", "namespace": "a", "scope": "owner"}], "scope must be read, publish"),
        ([{"group": "g", "namespace": "a", "scope": "read", "role": "x"}], "unknown key"),
        ({"group": "g"}, "array of tables"),
        (["g"], "must be a table"),
    ],
)
def test_bad_tables_are_refused(raw: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_grants(raw)


def test_the_grants_command_shows_the_effect_of_groups(tmp_path: Path) -> None:
    config = tmp_path / "gitreg.toml"
    config.write_text(TABLE)
    data = tmp_path / "data"
    shown = cli(data, "grants", "--config", str(config), "--groups", "platform-team,x").stdout
    assert shown.splitlines() == [
        "platform-team, x:",
        "  read on every namespace",
        "  publish on namespace platform",
    ]
    assert (
        "no grant; sign-in is refused"
        in cli(data, "grants", "--config", str(config), "--groups", "nobody").stdout
    )
    listing = cli(data, "grants", "--config", str(config)).stdout
    assert "group 'admins': admin on *" in listing
    assert not data.exists()  # a config check, not a registry command


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('group = ""\nnamespace = "a"\nscope = "read"', "entry 1: group must be"),
        ('group = "g"\nnamespace = "a"\nscope = "write"', "entry 1: scope must be"),
    ],
)
def test_the_grants_command_names_a_bad_entry(tmp_path: Path, entry: str, message: str) -> None:
    config = tmp_path / "gitreg.toml"
    config.write_text(f"[[grants]]\n{entry}\n")
    result = cli(tmp_path / "data", "grants", "--config", str(config), check=False)
    assert result.returncode != 0
    assert result.stderr.startswith(f"gitreg: error: [[grants]] {message}")


def test_a_sign_in_principal_acts_only_where_its_groups_allow() -> None:
    principal = Principal(
        token_id=1,
        scope=Scope.publish,
        namespaces=frozenset(),
        expires_at=None,
        grants={"platform": Scope.publish, "*": Scope.read},
    )
    assert principal.allows(Scope.publish, "Platform")
    assert principal.allows(Scope.read, "anything")
    assert not principal.allows(Scope.publish, "other")
    assert not principal.allows(Scope.admin, "platform")
    assert not principal.allows(Scope.publish, None)  # registry-wide needs "*"
    narrow = Principal(1, Scope.read, frozenset(), None, grants={"platform": Scope.read})
    assert narrow.allows(Scope.read, "platform")
    assert not narrow.allows(Scope.read, "other")
    assert not narrow.allows(Scope.read, None)

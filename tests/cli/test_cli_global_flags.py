"""`--data-dir` and `--config` take effect wherever they stand on the command line:
`gitreg --data-dir D sync` writes to D, not ./gitreg-data, and `gitreg --config
strict.toml serve` reads a file that makes the registry private."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitreg.cli import build_parser
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.server import RunningServer, cli

# Every command with the smallest arguments it parses with. The first test
# proves this list names every command the parser has, so a new command is
# tested here too.
COMMANDS: dict[tuple[str, ...], list[str]] = {
    ("serve",): [],
    ("key", "attestation", "rotate"): [],
    ("key", "attestation", "list"): ["--json"],
    ("verify",): ["/tmp/x", "--readonly"],
    ("repo", "add"): ["/tmp/repo", "--module", "a/b/c"],
    ("repo", "list"): [],
    ("repo", "remove"): ["a/b/c", "--keep-versions"],
    ("repo", "set"): ["a/b/c", "--tag-prefix", "x/"],
    ("sync",): [],
    ("backup",): ["/tmp/backup"],
    ("migrate-storage",): ["--to-database-url", "postgresql://u@h/db"],
    ("reindex",): [],
    ("audit", "list"): ["--since", "24h", "--action", "token.*"],
    ("audit", "prune"): [],
    ("oci", "zips"): [],
    ("modules", "list"): [],
    ("modules", "prefetch"): ["/tmp/config"],
    ("modules", "proxied"): ["--check"],
    ("modules", "import"): ["/tmp/export"],
    ("modules", "allow-breaking"): ["acme/vpc/aws", "1.3.0"],
    ("token", "create"): ["--scope", "read", "--namespace", "acme"],
    ("token", "list"): [],
    ("grants",): ["--groups", "a,b"],
    ("token", "revoke"): ["1"],
    ("namespace", "set"): ["acme", "--private"],
    ("namespace", "list"): [],
    ("secret", "rotate"): [],
    ("secret", "generate-key"): ["/tmp/secret.key"],
    ("jobs", "list"): [],
    ("jobs", "retry"): ["1"],
    ("jobs", "run"): [],
    ("jobs", "reconcile"): [],
    ("provider", "publish"): ["acme/tool", "1.0.0", "/tmp/dist"],
    ("provider", "sync"): [],
    ("providers",): [],
    ("key", "add"): ["acme", "/tmp/key.asc"],
    ("key", "generate"): ["acme"],
    ("key", "retire"): ["acme", "ABCDEF"],
    ("key", "export"): ["ABCDEF"],
    ("keys",): [],
    ("mirror", "sync"): ["/tmp/config"],
    ("mirror", "export"): ["/tmp/out"],
    ("mirror", "list"): [],
    ("doctor",): ["--json"],
    ("module", "yank"): ["acme/vpc/aws", "1.0.0"],
    ("module", "unyank"): ["acme/vpc/aws", "1.0.0"],
    ("module", "deprecate"): ["acme/vpc/aws", "1.0.0", "--reason", "use 2.x"],
    ("module", "undeprecate"): ["acme/vpc/aws", "1.0.0"],
    ("module", "usage"): ["acme/vpc/aws", "--versions", "1", "--days", "30", "--json"],
    ("provider", "yank"): ["acme/null", "1.0.0"],
    ("provider", "unyank"): ["acme/null", "1.0.0"],
}


def _leaf_commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> set[tuple[str, ...]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {path}
    found: set[tuple[str, ...]] = set()
    for name, child in subs[0].choices.items():
        found |= _leaf_commands(child, (*path, name))
    return found


def _parse(argv: list[str]) -> argparse.Namespace:
    try:
        return build_parser().parse_args(argv)
    except SystemExit as exc:  # pragma: no cover - shows which argv failed
        raise AssertionError(f"does not parse: {argv}") from exc


def test_the_command_list_covers_every_command() -> None:
    leaves = _leaf_commands(build_parser())
    assert leaves - set(COMMANDS) == set(), "add the new command to COMMANDS"
    assert set(COMMANDS) - leaves == set(), "a command in COMMANDS no longer exists"


@pytest.mark.parametrize("command", sorted(COMMANDS), ids="-".join)
def test_global_flags_before_and_after_the_command(command: tuple[str, ...]) -> None:
    extra = COMMANDS[command]
    flags = ["--data-dir", "/d", "--config", "/c.toml", "--secret-key-file", "/k"]
    for argv in (
        [*flags, *command, *extra],  # before the command
        [command[0], *flags, *command[1:], *extra],  # between a group and its command
        [*command, *extra, *flags],  # after everything
    ):
        args = _parse(argv)
        assert args.data_dir == Path("/d"), argv
        assert args.config == Path("/c.toml"), argv
        assert args.secret_key_file == Path("/k"), argv
    # Given twice, the one nearest the command wins, and nothing is silently dropped.
    args = _parse(["--data-dir", "/outer", *command, *extra, "--data-dir", "/inner"])
    assert args.data_dir == Path("/inner")
    args = _parse([*command, *extra])
    assert args.data_dir is None and args.config is None


@pytest.fixture
def elsewhere(tmp_path: Path) -> Iterator[Path]:
    """A working directory where ./gitreg-data must never appear."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    yield cwd
    assert not (cwd / "gitreg-data").exists(), "a command wrote to ./gitreg-data"


def _gitreg(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "gitreg", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("GITREG_")},
    )
    assert result.returncode == 0, result.stderr
    return result


def _tagged_module(make_repo: Callable[[str], GitRepo]) -> GitRepo:
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    return repo


@pytest.mark.slow
def test_data_dir_before_the_command_is_where_a_real_publish_lands(
    tmp_path: Path, elsewhere: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = _tagged_module(make_repo)
    data = tmp_path / "data"
    _gitreg(
        elsewhere, "--data-dir", str(data), "repo", "add", str(repo.path), "--module", "a/vpc/aws"
    )
    repo.tag("v1.1.0")
    _gitreg(elsewhere, "--data-dir", str(data), "sync")
    listing = _gitreg(elsewhere, "--data-dir", str(data), "modules").stdout
    assert "1.1.0" in listing
    assert (data / "index.sqlite3").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_config_before_serve_makes_the_registry_private(
    tmp_path: Path,
    make_repo: Callable[[str], GitRepo],
    servers: Callable[..., RunningServer],
    workers: str,
) -> None:
    repo = _tagged_module(make_repo)
    data = tmp_path / "data"
    cli(data, "repo", "add", str(repo.path), "--module", "a/vpc/aws")
    strict = tmp_path / "strict.toml"
    strict.write_text('read_default = "token"\n')
    server = servers(data, "--workers", workers, before=("--config", str(strict)))
    # Private by the file: anonymous reads are refused (404 hides the name).
    url = f"{server.url}/v1/modules/a/vpc/aws/versions"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, context=server.ssl_context(), timeout=5)
    refused.value.close()
    assert refused.value.code in (401, 404)

"""The command line: clear messages and non-zero exits, never a traceback."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from gitreg.cli import build_parser, main
from gitreg.cli_handlers import ReadOnly
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.server import cli, cli_process


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["repo", "add", "/nonexistent", "--module", "acme/vpc"], "NAMESPACE/NAME/SYSTEM"),
        (["repo", "add", "ext::sh -c id", "--module", "acme/vpc/aws"], "refused"),
        (["repo", "add", "https://169.254.169.254/x", "--module", "a/b/c"], "refused address"),
        (["repo", "add", "/tmp/x", "--module", "a/b/c", "--subdir", "../up"], "subdirectory"),
        (["repo", "add", "/tmp/x", "--module", "a/b/c", "--tag-prefix=a..b"], "tag prefix"),
        (["sync", "acme/none/aws"], "not registered"),
        (["serve", "--tls-cert", "/tmp/cert.pem"], "go together"),
        (["serve", "--port", "70000"], "port"),
    ],
)
def test_bad_input_is_a_message_and_non_zero_exit(
    data_dir: Path, args: list[str], message: str
) -> None:
    run = cli_process if args[0] == "serve" else cli  # serve refuses in its own process
    result = run(data_dir, *args, check=False)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_unreachable_remote_is_reported_and_fails(data_dir: Path, tmp_path: Path) -> None:
    result = cli(
        data_dir, "repo", "add", str(tmp_path / "missing"), "--module", "a/b/c", check=False
    )
    assert result.returncode == 1
    assert "cannot fetch" in result.stderr
    assert "Traceback" not in result.stderr
    # Nothing was registered (tests/repositories/test_registration.py has the details).
    assert cli(data_dir, "repo", "list").stdout == ""


def test_an_unresolvable_remote_is_one_error_line(data_dir: Path) -> None:
    url = "https://no-such-host.invalid/acme/terraform-aws-vpc.git"  # RFC 6761: never resolves
    result = cli(data_dir, "repo", "add", url, "--module", "acme/vpc/aws", check=False)
    assert result.returncode == 1
    [line] = result.stderr.splitlines()  # no retry warnings from the HTTP client before it
    assert line.startswith(f"gitreg: error: cannot fetch {url}: ")


def test_modules_verbose_shows_ignored_tags_and_conflicts(
    data_dir: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    repo.tag("latest")
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/vpc/aws")
    simple_module(repo, "moved")
    repo.commit("moved")
    repo.tag("v1.0.0", force=True)
    synced = cli(data_dir, "sync", "--verbose").stdout
    assert "conflict  acme/vpc/aws 1.0.0: tag v1.0.0 points at" in synced
    shown = cli(data_dir, "modules", "--verbose").stdout
    assert "acme/vpc/aws  1.0.0" in shown
    assert "ignored: latest:" in shown
    assert "  conflict: tag v1.0.0 points at" in shown
    assert "conflict: conflict" not in synced + shown  # said once


def test_empty_registry_explains_how_to_start(data_dir: Path) -> None:
    cli(data_dir, "namespace", "set", "acme", "--private")  # a registry, with no module
    assert "gitreg repo add" in cli(data_dir, "modules").stdout


def test_version_flag(data_dir: Path) -> None:
    assert cli(data_dir, "--version", check=False).stdout.startswith("gitreg ")


def _read_only_commands() -> list[list[str]]:
    """Every command whose handler only reads, with placeholder arguments."""
    found = []

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if isinstance(parser.get_default("handler"), ReadOnly):
            positional = [a for a in parser._actions if not a.option_strings]
            found.append([*words, *("x" for a in positional if a not in subcommands)])
        for action in subcommands:
            for name, sub in action.choices.items():
                walk(sub, [*words, name])

    walk(build_parser(), [])
    return found


@pytest.mark.parametrize("argv", _read_only_commands(), ids=" ".join)
def test_a_read_only_command_without_a_registry_says_so_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    data = tmp_path / "typo"
    argv = [word if word != "x" else str(tmp_path / "x") for word in argv]
    code = main([*argv, "--data-dir", str(data)])
    assert code == 1
    assert capsys.readouterr().err == (
        f"gitreg: error: no registry at {data}: there is no index.sqlite3 there; check"
        " --data-dir (GITREG_DATA_DIR), or start one with `gitreg repo add`\n"
    )
    assert list(tmp_path.iterdir()) == []  # no data dir, no backup or export directory


def test_every_listing_is_among_the_read_only_commands() -> None:
    listed = {" ".join(argv) for argv in _read_only_commands()}
    assert {"modules", "modules list", "repo list", "token list", "providers", "keys x"} <= listed
    assert {"jobs", "mirror list", "mirror export x", "backup x", "module usage x"} <= listed

"""The command line: clear messages and non-zero exits, never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo, simple_module
from tests.support.server import cli


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
    result = cli(data_dir, *args, check=False)
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
    # Nothing was registered (tests/modules/test_registration.py has the details).
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
    assert "gitreg repo add" in cli(data_dir, "modules").stdout


def test_version_flag(data_dir: Path) -> None:
    assert cli(data_dir, "--version", check=False).stdout.startswith("gitreg ")

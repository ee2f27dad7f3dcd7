"""End to end with the real Terraform CLI against a private namespace (issue 6).

No credentials: `terraform init` fails naming the authentication problem. A read
token in the CLI config: the module installs, its archive fetched through a
signed URL (Terraform sends no credentials for archives). A token for another
namespace: not found.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo, simple_module
from tests.support.server import RunningServer, cli, start_server
from tests.support.terraform import run_terraform


@dataclass
class Private:
    server: RunningServer
    team_token: str
    other_token: str


def _token(data_dir: Path, *args: str) -> str:
    out = cli(data_dir, "token", "create", "--scope", "read", *args).stdout
    return out.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Private]:
    root = tmp_path_factory.mktemp("e2e-private")
    data_dir = root / "data"
    repo = GitRepo(root / "vpc")
    simple_module(repo, "private hello")
    repo.commit()
    repo.tag("v1.0.0")
    cli(data_dir, "repo", "add", str(repo.path), "--module", "team/vpc/aws")
    cli(data_dir, "namespace", "set", "team", "--private")
    team = _token(data_dir, "--namespace", "team", "--expires-in", "1d")
    other = _token(data_dir, "--namespace", "elsewhere")
    server = start_server(data_dir)
    yield Private(server, team, other)
    server.stop()


def _workdir(tmp_path: Path, server: RunningServer) -> Path:
    (tmp_path / "main.tf").write_text(
        f'module "vpc" {{\n  source  = "{server.host}/team/vpc/aws"\n  version = "1.0.0"\n}}\n\n'
        'output "greeting" {\n  value = module.vpc.greeting\n}\n'
    )
    return tmp_path


def _credentials(server: RunningServer, token: str) -> str:
    return f'credentials "{server.host}" {{\n  token = "{token}"\n}}\n'


def test_without_credentials_init_names_the_auth_problem(private: Private, tmp_path: Path) -> None:
    result = run_terraform(
        _workdir(tmp_path, private.server), "init", ca_pem=private.server.ca_pem, check=False
    )
    assert result.returncode != 0
    assert "401 Unauthorized" in result.stderr


def test_read_token_installs_through_a_signed_archive_url(private: Private, tmp_path: Path) -> None:
    workdir = _workdir(tmp_path, private.server)
    config = _credentials(private.server, private.team_token)
    run_terraform(workdir, "init", ca_pem=private.server.ca_pem, cli_config=config)
    applied = run_terraform(
        workdir, "apply", "-auto-approve", ca_pem=private.server.ca_pem, cli_config=config
    )
    assert 'greeting = "private hello"' in applied.stdout
    log = private.server.log()
    assert "signature=" in log  # the archive GET carried its signed query
    assert private.team_token not in log  # tokens never reach the logs


def test_token_for_another_namespace_is_not_found(private: Private, tmp_path: Path) -> None:
    result = run_terraform(
        _workdir(tmp_path, private.server),
        "init",
        ca_pem=private.server.ca_pem,
        cli_config=_credentials(private.server, private.other_token),
        check=False,
    )
    assert result.returncode != 0
    assert "Module not found" in result.stderr

"""End to end with the real Terraform CLI against a private namespace.

No credentials: `terraform init` fails naming the authentication problem. A read
token in the CLI config: the module and the provider install, the archive and
the zip (with SHA256SUMS and signature) fetched through signed URLs, since
Terraform sends no credentials for those. A token for another namespace: not
found.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo, simple_module
from tests.support.provider_dist import make_dist
from tests.support.server import RunningServer, cli, start_server
from tests.support.terraform import null_provider_binary, run_terraform


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
    cli(data_dir, "key", "generate", "team")
    dist = make_dist("null", "2.1.2", ["linux_amd64"], null_provider_binary().read_bytes())
    del dist.files[dist.shasums_name]
    dist_dir = dist.write(root / "dist")
    cli(data_dir, "provider", "publish", "team/null", "2.1.2", str(dist_dir), "--sign")
    cli(data_dir, "namespace", "set", "team", "--private")
    team = _token(data_dir, "--namespace", "team", "--expires-in", "1d")
    other = _token(data_dir, "--namespace", "elsewhere")
    server = start_server(data_dir)
    yield Private(server, team, other)
    server.stop()


def _workdir(tmp_path: Path, server: RunningServer) -> Path:
    (tmp_path / "main.tf").write_text(
        "terraform {\n  required_providers {\n"
        f'    null = {{\n      source  = "{server.host}/team/null"\n'
        '      version = "2.1.2"\n    }\n'
        "  }\n}\n\n"
        f'module "vpc" {{\n  source  = "{server.host}/team/vpc/aws"\n  version = "1.0.0"\n}}\n\n'
        'resource "null_resource" "private" {}\n\n'
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
    assert "null_resource.private: Creation complete" in applied.stdout
    log = private.server.log()
    # The archive and the provider files were served (through signed URLs, which
    # Terraform fetched without credentials); the access lines name route
    # templates, so neither a signature nor a token reaches the log.
    served = [
        json.loads(line)
        for line in log.splitlines()
        if line.startswith("{") and '"logger":"gitreg.access"' in line
    ]
    ok_routes = {line["route"] for line in served if line["status"] == 200}
    assert "/archives/{sha256}.tar.gz" in ok_routes, ok_routes
    assert any(route.endswith("/files/{filename}") for route in ok_routes), ok_routes
    assert "signature=" not in log.replace("signature=***", "")
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

"""End to end: real git repos, the real CLI, `gitreg serve` over TLS, real Terraform.

`~> 1.0` installs 1.1.0, an exact prerelease installs, a monorepo
module using `../common` works, and `terraform apply` prints the outputs.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.server import RunningServer, cli, start_server
from tests.support.terraform import run_terraform


@dataclass
class Registry:
    server: RunningServer
    data_dir: Path
    repo: GitRepo
    mono: GitRepo


def _module_repo(path: Path) -> GitRepo:
    repo = GitRepo(path)
    for version in ("1.0.0", "1.1.0", "2.0.0-rc1"):
        repo.write(
            "main.tf",
            f'variable "name" {{\n  default = "net"\n}}\n\n'
            f'output "release" {{\n  value = "{version}"\n}}\n\n'
            f'output "name" {{\n  value = var.name\n}}\n',
        )
        repo.commit(f"release {version}")
        repo.tag(f"v{version}", annotated=version == "1.1.0")
    repo.tag("not-a-version")
    return repo


def _monorepo(path: Path) -> GitRepo:
    repo = GitRepo(path)
    repo.write("modules/common/main.tf", 'output "cidr" {\n  value = "10.0.0.0/16"\n}\n')
    repo.write(
        "modules/vpc/main.tf",
        'module "common" {\n  source = "../common"\n}\n\n'
        'output "cidr" {\n  value = module.common.cidr\n}\n',
    )
    repo.commit("monorepo")
    repo.tag("vpc/v0.3.0")
    return repo


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    root = tmp_path_factory.mktemp("e2e-modules")
    data_dir = root / "data"
    repo = _module_repo(root / "terraform-aws-net")
    mono = _monorepo(root / "infra")
    added = cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/net/aws")
    assert "published acme/net/aws 1.1.0" in added.stdout
    cli(
        data_dir,
        "repo",
        "add",
        str(mono.path),
        "--module",
        "acme/vpc/aws",
        "--subdir",
        "modules/vpc",
        "--tag-prefix",
        "vpc/",
    )
    # No periodic reconcile: its first run at start-up, late on a loaded machine,
    # could publish a tag a test pushes before the test's own `gitreg sync` does.
    server = start_server(data_dir, "--reconcile-interval", "0")
    yield Registry(server, data_dir, repo, mono)
    server.stop()


def _config(workdir: Path, body: str) -> Path:
    workdir.mkdir(parents=True)
    (workdir / "main.tf").write_text(body)
    return workdir


def _installed(workdir: Path, key: str) -> dict[str, str]:
    manifest = json.loads((workdir / ".terraform/modules/modules.json").read_text())
    return next(m for m in manifest["Modules"] if m["Key"] == key)


def test_constraint_installs_newest_matching_version(registry: Registry, tmp_path: Path) -> None:
    host = registry.server.host
    workdir = _config(
        tmp_path / "pessimistic",
        f'module "net" {{\n  source  = "{host}/acme/net/aws"\n  version = "~> 1.0"\n}}\n\n'
        'output "release" {\n  value = module.net.release\n}\n',
    )
    started = time.monotonic()
    run_terraform(workdir, "init", ca_pem=registry.server.ca_pem)
    print(f"terraform init wall time: {time.monotonic() - started:.2f}s")
    installed = _installed(workdir, "net")
    assert installed["Version"] == "1.1.0"
    assert '"1.1.0"' in (workdir / installed["Dir"] / "main.tf").read_text()
    applied = run_terraform(workdir, "apply", "-auto-approve", ca_pem=registry.server.ca_pem)
    assert 'release = "1.1.0"' in applied.stdout


def test_exact_prerelease_is_installed(registry: Registry, tmp_path: Path) -> None:
    workdir = _config(
        tmp_path / "rc",
        f'module "net" {{\n  source  = "{registry.server.host}/acme/net/aws"\n'
        '  version = "2.0.0-rc1"\n}\n',
    )
    run_terraform(workdir, "init", ca_pem=registry.server.ca_pem)
    installed = _installed(workdir, "net")
    assert installed["Version"] == "2.0.0-rc1"
    assert '"2.0.0-rc1"' in (workdir / installed["Dir"] / "main.tf").read_text()


def test_monorepo_module_with_relative_sibling_applies(registry: Registry, tmp_path: Path) -> None:
    workdir = _config(
        tmp_path / "mono",
        f'module "vpc" {{\n  source  = "{registry.server.host}/acme/vpc/aws"\n'
        '  version = "0.3.0"\n}\n\noutput "cidr" {\n  value = module.vpc.cidr\n}\n',
    )
    run_terraform(workdir, "init", ca_pem=registry.server.ca_pem)
    applied = run_terraform(workdir, "apply", "-auto-approve", ca_pem=registry.server.ca_pem)
    assert 'cidr = "10.0.0.0/16"' in applied.stdout


def test_unknown_module_fails_init_clearly(registry: Registry, tmp_path: Path) -> None:
    workdir = _config(
        tmp_path / "missing",
        f'module "x" {{\n  source  = "{registry.server.host}/acme/missing/aws"\n'
        '  version = "1.0.0"\n}\n',
    )
    result = run_terraform(workdir, "init", ca_pem=registry.server.ca_pem, check=False)
    assert result.returncode != 0
    assert "Module not found" in result.stderr


def _listed_versions(server: RunningServer) -> list[str]:
    url = f"{server.url}/v1/modules/acme/net/aws/versions"
    with urllib.request.urlopen(url, context=server.ssl_context(), timeout=5) as answer:
        body = json.loads(answer.read())
    return [v["version"] for v in body["modules"][0]["versions"]]


def test_cli_sync_while_serving_is_visible_without_restart(registry: Registry) -> None:
    registry.repo.write("later.tf", "# later\n")
    registry.repo.commit("later")
    registry.repo.tag("v1.2.0")
    synced = cli(registry.data_dir, "sync", "acme/net/aws")
    assert "published acme/net/aws 1.2.0" in synced.stdout
    deadline = time.monotonic() + 10
    while "1.2.0" not in _listed_versions(registry.server):
        assert time.monotonic() < deadline, "server never saw the new version"
        time.sleep(0.1)
    listing = json.loads(cli(registry.data_dir, "modules", "--json").stdout)
    net = next(m for m in listing if m["address"] == "acme/net/aws")
    assert [v["version"] for v in net["versions"]] == ["1.0.0", "1.1.0", "1.2.0", "2.0.0-rc1"]
    assert any("not-a-version" in line for line in net["ignored_tags"])

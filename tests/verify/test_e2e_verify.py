"""End to end: a real repository, `gitreg serve`, the real Terraform CLI and
`gitreg verify` (the Proof of docs/verify.md): it passes and writes the lock
file; one changed byte under .terraform/modules fails naming the file; an
upgrade not in the lock fails under --readonly; a rewritten log fails the
consistency check."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.attestations import spec_check
from tests.support.gitrepo import GitRepo
from tests.support.server import RunningServer, cli, start_server
from tests.support.terraform import run_terraform

pytestmark = pytest.mark.slow


@dataclass
class Registry:
    server: RunningServer
    data_dir: Path
    token: str


def _repo(path: Path) -> GitRepo:
    repo = GitRepo(path)
    for version in ("1.0.0", "1.1.0"):
        repo.write("main.tf", f'output "release" {{\n  value = "{version}"\n}}\n')
        repo.write("files/data.txt", f"data of {version}\n")
        repo.write("README.md", "# net\n")
        repo.commit(f"release {version}")
        repo.tag(f"v{version}", annotated=version == "1.0.0")
    return repo


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    data_dir = tmp_path / "data"
    repo = _repo(tmp_path / "terraform-aws-net")
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/net/aws")
    cli(data_dir, "namespace", "set", "acme", "--private")
    token = cli(data_dir, "token", "create", "--scope", "read", "--namespace", "acme")
    server = start_server(data_dir, "--reconcile-interval", "0")
    yield Registry(server, data_dir, token.stdout.strip().splitlines()[-1])
    server.stop()


def _workdir(tmp_path: Path, registry: Registry, version: str) -> Path:
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    (workdir / "local").mkdir(exist_ok=True)
    (workdir / "local" / "main.tf").write_text("# a local module\n")
    (workdir / "main.tf").write_text(
        f'module "net" {{\n  source  = "{registry.server.host}/acme/net/aws"\n'
        f'  version = "{version}"\n}}\n\nmodule "here" {{\n  source = "./local"\n}}\n'
    )
    return workdir


def _config(registry: Registry) -> str:
    return f'credentials "{registry.server.host}" {{\n  token = "{registry.token}"\n}}\n'


def _init(workdir: Path, registry: Registry, *flags: str) -> None:
    run_terraform(
        workdir, "init", *flags, ca_pem=registry.server.ca_pem, cli_config=_config(registry)
    )


def _verify(workdir: Path, registry: Registry, *flags: str) -> tuple[int, str, str]:
    env = {
        "SSL_CERT_FILE": str(registry.server.ca_pem),
        "TF_CLI_CONFIG_FILE": str(workdir / ".terraformrc"),  # as run_terraform wrote it
        "HOME": str(workdir / ".home"),
    }
    done = cli(registry.data_dir, "verify", str(workdir), *flags, env=env, check=False)
    return done.returncode, done.stdout, done.stderr


def test_verify_the_proof(registry: Registry, tmp_path: Path) -> None:
    workdir = _workdir(tmp_path, registry, "1.0.0")
    _init(workdir, registry)
    code, out, err = _verify(workdir, registry)
    assert code == 0, out + err
    assert "unverifiable here: local source ./local" in out
    lock = json.loads((workdir / "modules.lock.json").read_text())
    installed = workdir / ".terraform" / "modules" / "net"
    assert lock["modules"]["net"]["version"] == "1.0.0"
    assert lock["modules"]["net"]["dirHash"] == spec_check.dirhash_h1(installed)
    assert lock["registries"][registry.server.host]["checkpoint"]["size"] == 2
    assert _verify(workdir, registry, "--readonly")[0] == 0

    # One changed byte under .terraform/modules fails, naming the file.
    data = installed / "files" / "data.txt"
    original = data.read_bytes()
    data.write_bytes(original[:-2] + b"X\n")
    code, out, err = _verify(workdir, registry)
    assert code == 1
    failed = err.strip().splitlines()
    assert len(failed) == 1
    assert "net" in failed[0] and "files/data.txt differs" in failed[0]
    data.write_bytes(original)

    # An upgrade to a version not in the lock fails under --readonly.
    before = (workdir / "modules.lock.json").read_text()
    workdir = _workdir(tmp_path, registry, "1.1.0")
    _init(workdir, registry, "-upgrade")
    code, _, err = _verify(workdir, registry, "--readonly")
    assert code == 1
    assert "modules.lock.json has" in err and "1.0.0" in err
    assert (workdir / "modules.lock.json").read_text() == before  # --readonly changes nothing
    code, out, err = _verify(workdir, registry)
    assert code == 0, out + err
    assert (
        json.loads((workdir / "modules.lock.json").read_text())["modules"]["net"]["version"]
        == "1.1.0"
    )

    # Without the token the private statement is out of reach: a failure, not a pass.
    (workdir / ".terraformrc").write_text("")
    code, _, err = _verify(workdir, registry)
    assert code == 1 and "no access to the statement" in err


def test_a_rewritten_log_fails_the_consistency_check(registry: Registry, tmp_path: Path) -> None:
    cli(registry.data_dir, "key", "attestation", "rotate")
    cli(registry.data_dir, "key", "attestation", "rotate")
    workdir = _workdir(tmp_path, registry, "1.1.0")
    _init(workdir, registry)
    assert _verify(workdir, registry)[0] == 0
    # The operator's database is rewritten: the last two entries replaced, then more appended.
    with sqlite3.connect(registry.data_dir / "index.sqlite3") as db:
        db.execute("DELETE FROM tlog_entries WHERE idx >= 2")
        db.execute("DELETE FROM tlog_hashes WHERE idx >= 2")
    for _ in range(3):
        cli(registry.data_dir, "key", "attestation", "rotate")
    code, _, err = _verify(workdir, registry)
    assert code == 1
    assert "the log was rewritten" in err


def test_usage_errors_exit_2(registry: Registry, tmp_path: Path) -> None:
    assert _verify(tmp_path / "missing", registry)[0] == 2
    (tmp_path / "empty").mkdir()
    code, _, err = _verify(tmp_path / "empty", registry)
    assert code == 2 and "terraform init" in err

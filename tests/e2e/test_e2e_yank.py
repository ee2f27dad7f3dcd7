"""End to end: what a yank means to the real Terraform CLI (1.0.3).

Terraform resolves every provider and module through the version list, lock
file or not: it never asks for a version the list does not name. So a yank is
a withdrawal: new `init`s pick the newest version still listed, and a working
directory whose lock file pins the yanked version fails `init` ("the
previously-selected version ... is no longer available") until the version is
unyanked or the lock file moves on. Modules have no lock file: a configuration
pinned to the yanked version fails a new `init`, while a directory initialised
before keeps its copy. docs/providers.md and docs/modules.md say so; these
tests keep those sentences true.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.gitrepo import GitRepo, simple_module
from tests.support.provider_dist import make_dist
from tests.support.server import RunningServer, cli
from tests.support.terraform import installed_module_version, null_provider_binary, run_terraform

NOTICE_DEADLINE = 30.0


def _init(server: RunningServer, workdir: Path, *args: str) -> tuple[int, str]:
    result = run_terraform(
        workdir, "init", "-input=false", *args, ca_pem=server.ca_pem, check=False
    )
    return result.returncode, result.stdout + result.stderr


def _wait_unlisted(server: RunningServer, workdir: Path, version: str) -> tuple[int, str]:
    """`init` until the server has noticed the CLI's yank (it polls for it)."""
    deadline = time.monotonic() + NOTICE_DEADLINE
    while True:
        code, output = _init(server, workdir)
        noticed = f"{version} is no longer" in " ".join(output.split())
        if noticed or time.monotonic() > deadline:
            return code, output
        time.sleep(0.25)


def test_a_yanked_provider_is_withdrawn_from_terraform(
    servers: Callable[..., RunningServer], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    binary = null_provider_binary().read_bytes()
    cli(data, "key", "generate", "acme")
    for version in ("2.1.1", "2.1.2"):
        dist = make_dist("null", version, ["linux_amd64"], binary, signer=None)
        del dist.files[dist.shasums_name]  # gitreg signs (--sign)
        directory = dist.write(tmp_path / f"dist-{version}")
        cli(data, "provider", "publish", "acme/null", version, str(directory), "--sign")
    server = servers(data)
    locked, fresh = tmp_path / "locked", tmp_path / "fresh"
    for workdir in (locked, fresh):
        workdir.mkdir()
        (workdir / "main.tf").write_text(
            "terraform {\n  required_providers {\n"
            f'    null = {{\n      source  = "{server.host}/acme/null"\n'
            '      version = ">= 2.0.0"\n    }\n  }\n}\n'
        )
    code, output = _init(server, locked)
    assert code == 0 and "acme/null v2.1.2" in output

    cli(data, "provider", "yank", "acme/null", "2.1.2")
    # The provider is already in `locked`/.terraform: init still asks the list.
    code, output = _wait_unlisted(server, locked, "2.1.2")
    assert code == 1
    assert "the previously-selected version 2.1.2 is no longer" in " ".join(output.split())
    assert run_terraform(locked, "plan", "-input=false", ca_pem=server.ca_pem).returncode == 0
    code, output = _init(server, fresh)
    assert code == 0 and "acme/null v2.1.1" in output
    upgraded = tmp_path / "upgraded"
    shutil.copytree(locked, upgraded, ignore=shutil.ignore_patterns(".terraform", ".home"))
    code, output = _init(server, upgraded, "-upgrade")
    assert code == 0 and "acme/null v2.1.1" in output

    cli(data, "provider", "unyank", "acme/null", "2.1.2")
    deadline = time.monotonic() + NOTICE_DEADLINE
    while (code := _init(server, locked)[0]) != 0 and time.monotonic() < deadline:
        time.sleep(0.25)
    assert code == 0


def _module_workdir(path: Path, server: RunningServer, version: str) -> Path:
    path.mkdir()
    (path / "main.tf").write_text(
        f'module "vpc" {{\n  source  = "{server.host}/acme/vpc/aws"\n  version = "{version}"\n}}\n'
    )
    return path


def test_a_yanked_module_is_withdrawn_from_new_inits_only(
    servers: Callable[..., RunningServer], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    repo = GitRepo(tmp_path / "vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    repo.tag("v1.1.0")
    cli(data, "repo", "add", str(repo.path), "--module", "acme/vpc/aws")
    server = servers(data)
    initialised = _module_workdir(tmp_path / "initialised", server, "1.1.0")
    assert _init(server, initialised)[0] == 0

    cli(data, "module", "yank", "acme/vpc/aws", "1.1.0")
    pinned = _module_workdir(tmp_path / "pinned", server, "1.1.0")
    deadline = time.monotonic() + NOTICE_DEADLINE
    while (result := _init(server, pinned))[0] == 0 and time.monotonic() < deadline:
        shutil.rmtree(pinned / ".terraform")  # the server had not noticed yet: try anew
        time.sleep(0.25)
    assert result[0] == 1 and "Unresolvable module version constraint" in result[1]
    ranged = _module_workdir(tmp_path / "ranged", server, "~> 1.0")
    assert _init(server, ranged)[0] == 0
    assert installed_module_version(ranged, "vpc") == "1.0.0"
    # A directory initialised before the yank keeps its copy: no list is asked.
    assert _init(server, initialised)[0] == 0
    assert installed_module_version(initialised, "vpc") == "1.1.0"

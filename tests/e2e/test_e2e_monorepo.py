"""End to end: a monorepo registered with `repo add --modules`, published by
`git push` (hooks/post-receive -> webhook -> job -> sync), installed by real Terraform.

A tag for one module publishes that module only; a module directory pushed later is
registered and published by the sync its push triggers, with no new `repo add`.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_e2e_push import (
    Servers,
    bare_remote,
    configure_hook,
    push,
    terraform_installs,
    versions,
    wait_for_version,
)
from tests.support.gitrepo import GitRepo
from tests.support.server import cli


def _module(work: GitRepo, name: str, version: str) -> None:
    """A module whose `greeting` output is its version (what terraform_installs checks)."""
    work.write(
        f"modules/{name}/main.tf",
        f'variable "greeting" {{\n  default = "{version}"\n}}\n\n'
        'output "greeting" {\n  value = var.greeting\n}\n',
    )


def test_pushed_monorepo_modules_publish_one_by_one_and_install(
    servers: Servers, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    work = GitRepo(tmp_path / "work")
    _module(work, "vpc", "1.0.0")
    _module(work, "dns", "0.1.0")
    work.commit("two modules")
    work.tag("vpc/v1.0.0")
    bare = bare_remote(work, tmp_path / "git" / "acme" / "infra.git", hook=True)
    assert push(work, "main", "vpc/v1.0.0").returncode == 0
    added = cli(
        data_dir,
        "repo",
        "add",
        str(bare),
        "--modules",
        "modules/*",
        "--namespace",
        "acme",
        "--system",
        "null",
        "--tag-pattern",
        "{name}/v{version}",
    )
    # Modules are found in tagged trees: dns has no tag yet, but its directory is there.
    assert "registered acme/vpc/null (modules/vpc)" in added.stdout
    assert "registered acme/dns/null (modules/dns)" in added.stdout
    assert "published acme/vpc/null 1.0.0" in added.stdout
    assert "published acme/dns/null" not in added.stdout
    created = cli(data_dir, "token", "create", "--scope", "publish", "--namespace", "acme")
    token = created.stdout.strip().splitlines()[-1]
    server = servers(data_dir, "--reconcile-interval", "0")
    configure_hook(bare, server, token, tmp_path)
    assert versions(server, "acme/dns/null") == []
    terraform_installs(server, "acme/vpc/null", "1.0.0", tmp_path / "tf-vpc")

    # A module directory that did not exist at `repo add`, pushed with its first tag.
    _module(work, "s3", "0.2.0")
    work.commit("s3 module")
    work.tag("s3/v0.2.0")
    pushed = push(work, "main", "s3/v0.2.0")
    assert pushed.returncode == 0, pushed.stderr
    wait_for_version(server, "acme/s3/null", "0.2.0")
    terraform_installs(server, "acme/s3/null", "0.2.0", tmp_path / "tf-s3")
    assert versions(server, "acme/vpc/null") == ["1.0.0"]
    assert versions(server, "acme/dns/null") == []

    listing = json.loads(cli(data_dir, "modules", "--json").stdout)
    subdirs = {m["address"]: m["subdir"] for m in listing}
    assert subdirs == {
        "acme/dns/null": "modules/dns",
        "acme/s3/null": "modules/s3",
        "acme/vpc/null": "modules/vpc",
    }

"""End to end: what a deprecated module version means to the real Terraform CLI.

`gitreg module deprecate` adds `deprecation: {reason, link}` to the version's
entry in `/v1/modules/.../versions` and changes nothing else. Both Terraform
1.0.3 (the test extra) and the newest Terraform on the machine read that list
with a decoder that ignores fields it does not know, so both install the
deprecated version exactly as before. Neither prints the notice: the
open-source CLI's module installer has no deprecation warning (one was merged
in hashicorp/terraform#35231 and reverted in #35264, May 2024; up to 1.11.4
`internal/registry/response.ModuleVersion` has no such field). docs/modules.md
says so; this test keeps that sentence true, and fails the day a Terraform on
the machine starts showing the reason, so the docs get updated then.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.support.gitrepo import GitRepo, simple_module
from tests.support.server import RunningServer, cli
from tests.support.terraform import installed_module_version, run_terraform, terraform_binary

REASON = "1.0.x leaks state; upgrade to 1.1.0"
LINK = "https://docs.example.com/vpc/upgrade"


def _newest_terraform() -> Path:
    found = shutil.which("terraform")
    assert found is not None, "no terraform on PATH"
    return Path(found)


def test_a_deprecated_module_version_still_installs_with_every_terraform(
    servers: Callable[..., RunningServer], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    repo = GitRepo(tmp_path / "vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    repo.tag("v1.1.0")
    cli(data, "repo", "add", str(repo.path), "--module", "acme/vpc/aws")
    args = ("acme/vpc/aws", "1.0.0", "--reason", REASON, "--link", LINK)
    out = cli(data, "module", "deprecate", *args).stdout
    assert out.startswith("deprecated module acme/vpc/aws 1.0.0")
    server = servers(data)
    assert _listed(server) == [
        {"version": "1.0.0", "deprecation": {"reason": REASON, "link": LINK}},
        {"version": "1.1.0"},
    ]
    newest = _newest_terraform()
    shown = run_terraform(tmp_path, "version", "-json", binary=newest).stdout
    major, minor = json.loads(shown)["terraform_version"].split(".")[:2]
    assert (int(major), int(minor)) >= (1, 10)  # the versions the issue asked about
    for name, binary in (("1.0.3", terraform_binary()), ("newest", newest)):
        workdir = tmp_path / name
        workdir.mkdir()
        (workdir / "main.tf").write_text(
            f'module "vpc" {{\n  source  = "{server.host}/acme/vpc/aws"\n  version = "1.0.0"\n}}\n'
        )
        result = run_terraform(workdir, "init", "-input=false", ca_pem=server.ca_pem, binary=binary)
        output = " ".join((result.stdout + result.stderr).split())
        assert "Downloading" in output and "acme/vpc/aws 1.0.0 for vpc" in output, output
        assert "successfully initialized" in output
        assert installed_module_version(workdir, "vpc") == "1.0.0"
        # What docs/modules.md says: no released Terraform prints the notice.
        assert "leaks state" not in output and "deprecat" not in output.lower(), (name, output)


def _listed(server: RunningServer) -> list[dict[str, object]]:
    url = server.url + "/v1/modules/acme/vpc/aws/versions"
    with urllib.request.urlopen(url, context=server.ssl_context(), timeout=10) as answer:
        body = json.loads(answer.read())
    return list(body["modules"][0]["versions"])

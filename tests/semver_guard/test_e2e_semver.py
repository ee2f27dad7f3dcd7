"""End to end: the semver guard from `git push` and a signed forge webhook,
through a real `gitreg serve` and its job runner, to the real Terraform CLI."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_e2e_push import bare_remote, post, push, versions, wait_for_version
from tests.support.gitrepo import GitRepo
from tests.support.server import RunningServer, cli
from tests.support.terraform import installed_module_version, run_terraform
from tests.support.webhooks import delivery

pytestmark = pytest.mark.slow

SECRET = "semver-webhook-secret"
FORGE_REPO = "acme/terraform-null-greeting"
ADDRESS = "acme/greeting/null"
V1 = """
variable "greeting" {
  default = "hello"
}
variable "size" {
  type    = number
  default = 1
}
output "greeting" {
  value = var.greeting
}
"""
WITHOUT_SIZE = """
variable "greeting" {
  default = "hello"
}
output "greeting" {
  value = var.greeting
}
"""
Servers = Callable[..., RunningServer]


def _setup(servers: Servers, tmp_path: Path, policy: str) -> tuple[Path, GitRepo, RunningServer]:
    data = tmp_path / "data"
    work = GitRepo(tmp_path / "work")
    work.write("main.tf", V1)
    work.commit("v1.2.0")
    bare = bare_remote(work, tmp_path / "git" / "acme" / "greeting.git", hook=False)
    push(work, "main")
    add = ["repo", "add", str(bare), "--module", ADDRESS, "--no-sync", "--semver-check", policy]
    cli(data, *add, "--forge-repo", FORGE_REPO, "--webhook-secret", SECRET)
    server = servers(data, "--reconcile-interval", "0")
    _release(server, work, "v1.2.0")
    wait_for_version(server, ADDRESS, "1.2.0")
    return data, work, server


def _release(server: RunningServer, work: GitRepo, tag: str, text: str | None = None) -> None:
    if text is not None:
        work.write("main.tf", text)
        work.commit(tag)
    work.tag(tag)
    assert push(work, "main", tag).returncode == 0
    after = work.rev(f"{tag}^{{commit}}")
    prepared = delivery(
        "github", "push-tag-created", repo=FORGE_REPO, tag=tag, after=after, secret=SECRET
    )
    status, body, _ = post(server, prepared)
    assert status == 202, body


def _jobs_done(data: Path, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 60
    while True:
        jobs = json.loads(cli(data, "jobs", "list", "--json").stdout)["jobs"]
        if len(jobs) >= count and all(j["state"] == "done" for j in jobs):
            return list(jobs)
        assert time.monotonic() < deadline, jobs
        time.sleep(0.1)


def _get(server: RunningServer, path: str, token: str = "") -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(server.url + path, headers=headers)
    with urllib.request.urlopen(request, context=server.ssl_context(), timeout=30) as answer:
        body = answer.read()
    return json.loads(body) if path != "/metrics" else body.decode()


def _init(server: RunningServer, workdir: Path, constraint: str) -> str:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "main.tf").write_text(
        f'module "m" {{\n  source  = "{server.host}/{ADDRESS}"\n  version = "{constraint}"\n}}\n'
    )
    run_terraform(workdir, "init", "-upgrade", "-input=false", ca_pem=server.ca_pem)
    return installed_module_version(workdir, "m")


def _admin_token(data: Path) -> str:
    created = cli(data, "token", "create", "--scope", "admin")
    return created.stdout.strip().splitlines()[-1]


def test_enforce_refuses_a_breaking_minor_and_terraform_stays_on_the_last_good(
    servers: Servers, tmp_path: Path
) -> None:
    data, work, server = _setup(servers, tmp_path, "enforce")
    _release(server, work, "v1.3.0", WITHOUT_SIZE)
    jobs = _jobs_done(data, 2)
    refused = next(j for j in jobs if j["result"] and j["result"]["conflicts"])
    assert (
        'tag v1.3.0 is a breaking change in a minor release against 1.2.0: variable "size"'
        in (refused["result"]["conflicts"][0])
    )
    assert versions(server, ADDRESS) == ["1.2.0"]
    assert _init(server, tmp_path / "tf1", "~> 1.2") == "1.2.0"

    token = _admin_token(data)
    conflicts = _get(server, "/admin/conflicts", token)["conflicts"]
    assert [c["version"] for c in conflicts] == ["1.3.0"]
    assert "allow-breaking acme/greeting/null 1.3.0" in conflicts[0]["reason"]
    diff = _get(server, f"/v1/modules/{ADDRESS}/1.3.0/changes")
    assert diff["status"] == "refused" and diff["from"] == "1.2.0"
    assert [c["detail"] for c in diff["changes"]] == ['variable "size" removed']

    # The same change as the next major publishes and installs.
    _release(server, work, "v2.0.0")
    wait_for_version(server, ADDRESS, "2.0.0")
    assert sorted(versions(server, ADDRESS)) == ["1.2.0", "2.0.0"]
    assert _init(server, tmp_path / "tf2", "~> 2.0") == "2.0.0"
    assert _init(server, tmp_path / "tf1", "~> 1.2") == "1.2.0"
    assert 'gitreg_semver_breaking_total{outcome="refused"} 1.0' in _get(server, "/metrics", token)


def test_warn_publishes_and_the_api_names_the_removed_variable(
    servers: Servers, tmp_path: Path
) -> None:
    data, work, server = _setup(servers, tmp_path, "warn")
    _release(server, work, "v1.3.0", WITHOUT_SIZE)
    wait_for_version(server, ADDRESS, "1.3.0")
    jobs = _jobs_done(data, 2)
    labelled = [j["result"]["breaking"] for j in jobs if j["result"] and j["result"]["breaking"]]
    assert labelled == [
        [
            "acme/greeting/null 1.3.0: breaking change in a minor release against 1.2.0:"
            ' variable "size" removed'
        ]
    ]
    record = _get(server, f"/v1/modules/{ADDRESS}/1.3.0")
    assert record["semver"]["label"] == "breaking change in a minor release"
    assert record["semver"]["breaking"] == ['variable "size" removed']
    assert record["breaking_versions"] == ["1.3.0"]
    diff = _get(server, f"/v1/modules/{ADDRESS}/1.3.0/changes")
    assert diff["from"] == "1.2.0" and diff["counts"]["breaking"] == 1
    back = _get(server, f"/v1/modules/{ADDRESS}/1.2.0/changes?from=1.3.0")
    assert [c["change"] for c in back["changes"]] == ["added"]
    assert _init(server, tmp_path / "tf", "~> 1.2") == "1.3.0"
    token = _admin_token(data)
    assert 'gitreg_semver_breaking_total{outcome="labelled"} 1.0' in _get(server, "/metrics", token)
    with pytest.raises(urllib.error.HTTPError) as missing:
        _get(server, f"/v1/modules/{ADDRESS}/1.9.0/changes")
    assert missing.value.code == 404
    missing.value.close()

"""End to end: in-house providers installed by the real Terraform CLI.

The real `null` provider binary (TERRAFORM-CLIENT.md) is packaged as goreleaser
would for linux_amd64 and darwin_arm64 (the second only has to be hashed by
`terraform providers lock`, never run), then published two ways:

1. a GitHub release (a local server shaped like GitHub's releases API, over TLS
   with its own CA) announced by a signed `release` webhook, with SHA256SUMS
   signed by the publisher's RSA key;
2. the CI upload (`gitreg provider publish ... --sign --url`) with SHA256SUMS
   signed by a key gitreg generated.

For each, `terraform init` prints "(self-signed, key ID <the key>)", `terraform
apply` runs the provider, and `terraform providers lock` for both platforms
succeeds and records the h1:/zh: hashes gitreg computed.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.fake_github import FakeGitHub
from tests.support.gitrepo import GitRepo
from tests.support.provider_dist import Dist, key_id, make_dist, public_armor, publisher_key
from tests.support.server import RunningServer, cli
from tests.support.terraform import null_provider_binary, run_terraform

Servers = Callable[..., RunningServer]
SECRET = "provider-webhook-secret"
GH_TOKEN = "ghp_fake_token_for_tests"
PLATFORMS = ("linux_amd64", "darwin_arm64")
PUBLISH_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def binary() -> bytes:
    return null_provider_binary().read_bytes()


@pytest.fixture
def github(tmp_path: Path) -> Iterator[FakeGitHub]:
    fake = FakeGitHub(tmp_path / "github-tls", token=GH_TOKEN).start()
    yield fake
    fake.stop()


def _get_json(server: RunningServer, path: str) -> tuple[int, object]:
    try:
        with urllib.request.urlopen(
            server.url + path, context=server.ssl_context(), timeout=10
        ) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _post(server: RunningServer, path: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(server.url + path, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, context=server.ssl_context(), timeout=10) as answer:
            status: int = answer.status  # typeshed types urlopen's answer as Any
            return status
    except urllib.error.HTTPError as exc:
        return exc.code


def _wait_for_version(server: RunningServer, address: str, version: str) -> None:
    deadline = time.monotonic() + PUBLISH_TIMEOUT
    while time.monotonic() < deadline:
        status, body = _get_json(server, f"/v1/providers/{address}/versions")
        listed = body.get("versions", []) if status == 200 and isinstance(body, dict) else []
        if any(v["version"] == version for v in listed):
            return
        time.sleep(0.25)
    raise AssertionError(f"{address} {version} was not published:\n{server.log()[-4000:]}")


def _terraform_round_trip(
    server: RunningServer, workdir: Path, address: str, version: str, expected_key: str
) -> None:
    """init (signature checked), apply (the provider runs), lock for two platforms."""
    workdir.mkdir()
    source = f"{server.host}/{address}"
    (workdir / "main.tf").write_text(
        "terraform {\n  required_providers {\n"
        f'    null = {{\n      source  = "{source}"\n      version = "{version}"\n    }}\n'
        '  }\n}\n\nresource "null_resource" "hello" {}\n'
    )
    init = run_terraform(workdir, "init", "-input=false", ca_pem=server.ca_pem)
    assert f"Installed {source} v{version} (self-signed, key ID {expected_key})" in init.stdout
    apply = run_terraform(workdir, "apply", "-auto-approve", "-input=false", ca_pem=server.ca_pem)
    assert "null_resource.hello: Creation complete" in apply.stdout
    lock = run_terraform(
        workdir,
        "providers",
        "lock",
        *(f"-platform={p}" for p in PLATFORMS),
        ca_pem=server.ca_pem,
    )
    assert lock.returncode == 0
    # Terraform's own hashes of what it downloaded agree with what gitreg computed.
    listed = json.loads(cli(server.data_dir, "providers", "--json").stdout)
    provider = next(p for p in listed if p["provider"] == address)
    packages = next(v for v in provider["versions"] if v["version"] == version)["packages"]
    assert {p["platform"] for p in packages} == set(PLATFORMS)
    lock_file = (workdir / ".terraform.lock.hcl").read_text()
    for package in packages:
        for value in package["hashes"]:
            assert f'"{value}"' in lock_file


def test_github_release_via_signed_webhook(
    servers: Servers,
    github: FakeGitHub,
    binary: bytes,
    make_repo: Callable[[str], GitRepo],
    tmp_path: Path,
) -> None:
    publisher = publisher_key()
    dist = make_dist("null", "2.1.2", PLATFORMS, binary, publisher)
    repo_name = "acme/terraform-provider-null"
    data = tmp_path / "data"
    data.mkdir()
    # GitHub Enterprise style: the forge's API base, a token by reference, a private CA.
    (data / "gitreg.toml").write_text(
        f'[forges.github]\nkind = "github"\napi_url = "{github.api_url}"\n'
        f'token = "env:E2E_GITHUB_TOKEN"\nca_file = "{github.ca_file}"\n'
    )
    source_repo = make_repo("terraform-provider-null")
    source_repo.write("main.go", "package main\n")
    source_repo.commit()
    (tmp_path / "publisher.asc").write_bytes(public_armor(publisher))
    cli(data, "key", "add", "acme", str(tmp_path / "publisher.asc"))
    cli(
        data,
        "repo",
        "add",
        str(source_repo.path),
        "--provider",
        "acme/null",
        "--forge",
        "github",
        "--forge-repo",
        repo_name,
        "--webhook-secret",
        SECRET,
        "--no-sync",
    )
    server = servers(data, env={"E2E_GITHUB_TOKEN": GH_TOKEN})

    release = github.add_release(repo_name, "v2.1.2", dist.files)
    body, headers = github.webhook(release, SECRET)
    assert _post(server, "/webhooks/github", body, headers) in (200, 202)
    _wait_for_version(server, "acme/null", "2.1.2")

    _terraform_round_trip(server, tmp_path / "tf", "acme/null", "2.1.2", key_id(publisher))
    # The token went to the API origin only, never to the storage host it redirects to.
    api_calls = [s for s in github.seen if s.path.startswith("/repos/")]
    downloads = [s for s in github.seen if s.path.startswith("/storage/")]
    assert api_calls and all(s.authorized for s in api_calls)
    assert downloads and not any(s.authorized for s in downloads)


def test_ci_upload_signed_by_gitreg(servers: Servers, binary: bytes, tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = servers(data)
    cli(data, "key", "generate", "ciacme")
    keys = json.loads(cli(data, "keys", "ciacme", "--json").stdout)
    gitreg_key = keys[0]["key_id"]
    token = cli(
        data, "token", "create", "--scope", "publish", "--namespace", "ciacme"
    ).stdout.split()[-1]
    # goreleaser's dist/ without any signature: gitreg signs (--sign).
    dist: Dist = make_dist("null", "2.1.2", PLATFORMS, binary, signer=None)
    del dist.files[dist.shasums_name]
    dist_dir = dist.write(tmp_path / "dist")
    (dist_dir / "artifacts.json").write_text("[]")  # goreleaser's extra files are skipped

    upload = cli(
        tmp_path / "ci-machine",
        "provider",
        "publish",
        "ciacme/null",
        "2.1.2",
        str(dist_dir),
        "--sign",
        "--url",
        server.url,
        "--ca-file",
        str(server.ca_pem),
        env={"GITREG_TOKEN": token},
    )
    assert f"SHA256SUMS signed by gitreg key {gitreg_key}" in upload.stdout
    assert not (tmp_path / "ci-machine").exists()  # an upload needs no local data dir
    _wait_for_version(server, "ciacme/null", "2.1.2")

    _terraform_round_trip(server, tmp_path / "tf", "ciacme/null", "2.1.2", gitreg_key)

"""CI jobs without secrets, end to end: a real `gitreg serve` trusting local
issuers shaped like GitHub Actions' and Kubernetes' (tests/support/workload_issuer.py),
the real Terraform CLI, the real `gitreg provider publish --url`, and `gitreg audit`.

- `terraform init` of a private module with the raw ID token in a `credentials`
  block works for an allowed repository; another repository, another audience,
  an expired token, a token signed by an unknown key and a forged `alg` fail.
- A token exchanged at /oauth/token (RFC 8693) installs the module, stops
  working when it expires, and cannot publish when its rule only reads.
- A provider CI upload from the release workflow on a tag publishes; the same
  workflow on a fork's pull request is refused.
- An issuer that cannot be reached is 503, never 500.
- Each of those actions is one row of `gitreg audit`, with the actor and rule,
  also through `GET /v1/admin/audit` for an admin token.

(Terraform 1.0's `TF_TOKEN_<host>` variables cannot name a host with a port,
and do not exist before 1.2: the `credentials` block is the same credential.)
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.gitrepo import GitRepo, simple_module
from tests.support.provider_dist import make_dist
from tests.support.server import RunningServer, cli, free_port, start_server
from tests.support.terraform import run_terraform
from tests.support.workload_issuer import Issuer, WorkloadIssuers, new_key
from tests.workload_identity.conftest import AUDIENCE, workload_config, write_config
from tests.workload_identity.conftest import issuers as issuers  # the fixture, for this module

EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"


@dataclass
class Registry:
    server: RunningServer
    data_dir: Path
    admin_token: str
    read_token: str
    lost: Issuer  # an issuer gitreg trusts that cannot be reached


@pytest.fixture(scope="module")
def registry(
    tmp_path_factory: pytest.TempPathFactory, issuers: WorkloadIssuers
) -> Iterator[Registry]:
    root = tmp_path_factory.mktemp("e2e-workload")
    data_dir = root / "data"
    lost = Issuer("github", f"https://127.0.0.1:{free_port()}/lost", [new_key("lost-1")])
    unreachable = f"""
[[workload_identity]]
issuer = "{lost.url}"
audience = "{AUDIENCE}"

[[workload_identity.rules]]
claims = {{ repository = "acme/infra-live" }}
namespace = "acme"
scope = "read"
"""
    # Many refusals from one address on purpose: above the failed-authentication limit.
    write_config(data_dir, "auth_fail_limit = 1000\n" + workload_config(issuers, unreachable))
    repo = GitRepo(root / "vpc")
    simple_module(repo, "hello from a private module")
    repo.commit()
    repo.tag("v1.0.0")
    cli(
        data_dir,
        "repo",
        "add",
        str(repo.path),
        "--module",
        "acme/vpc/aws",
        "--forge-repo",
        "acme/terraform-aws-vpc",
    )
    cli(data_dir, "key", "generate", "acme")
    cli(data_dir, "namespace", "set", "acme", "--private")
    admin = cli(data_dir, "token", "create", "--scope", "admin").stdout.split()[-1]
    read = cli(data_dir, "token", "create", "--scope", "read").stdout.split()[-1]
    server = start_server(data_dir)
    yield Registry(server, data_dir, admin, read, lost)
    server.stop()


def _init(registry: Registry, workdir: Path, token: str) -> Any:
    workdir.mkdir(parents=True, exist_ok=True)
    host = registry.server.host
    (workdir / "main.tf").write_text(
        f'module "vpc" {{\n  source  = "{host}/acme/vpc/aws"\n  version = "1.0.0"\n}}\n'
    )
    config = f'credentials "{host}" {{\n  token = "{token}"\n}}\n'
    return run_terraform(
        workdir, "init", ca_pem=registry.server.ca_pem, cli_config=config, check=False
    )


def _request(
    registry: Registry,
    method: str,
    path: str,
    token: str = "",
    form: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
) -> tuple[int, dict[str, Any]]:
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    if body is not None:
        data = json.dumps(body).encode()
    request = urllib.request.Request(registry.server.url + path, data=data, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if form is not None:
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    context = ssl.create_default_context(cafile=str(registry.server.ca_pem))
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def _exchange(registry: Registry, id_token: str) -> tuple[int, dict[str, Any]]:
    form = {"grant_type": EXCHANGE, "subject_token": id_token, "subject_token_type": ID_TOKEN}
    return _request(registry, "POST", "/oauth/token", form=form)


def _audit(registry: Registry, *args: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(cli(registry.data_dir, "audit", "--json", *args).stdout)
    return rows


def test_the_raw_id_token_installs_a_private_module(
    registry: Registry, issuers: WorkloadIssuers, tmp_path: Path
) -> None:
    token = issuers["github"].sign(AUDIENCE, repository="acme/infra-live", run_id="101")
    result = _init(registry, tmp_path, token)
    assert result.returncode == 0, result.stderr
    assert "Downloading" in result.stdout
    assert token not in registry.server.log()
    (row,) = [
        r
        for r in _audit(registry, "--action", "sign_in.workload", "--actor", "infra-live")
        if r["result"] == "ok"
    ]
    assert row["actor"]["kind"] == "workload"
    assert row["actor"]["rule"] == "workload_identity[1].rules[1]"
    assert row["client"] == "127.0.0.1"


@pytest.mark.parametrize(
    "case", ["other-repository", "other-audience", "expired", "unknown-key", "none", "HS256"]
)
def test_other_tokens_fail_cleanly(
    registry: Registry, issuers: WorkloadIssuers, tmp_path: Path, case: str
) -> None:
    github = issuers["github"]
    token = {
        "other-repository": lambda: github.sign(AUDIENCE, repository="acme/infra-dead"),
        "other-audience": lambda: github.sign("https://else.example.com"),
        "expired": lambda: github.sign(AUDIENCE, now=time.time() - 900),
        "unknown-key": lambda: github.sign(AUDIENCE, key=new_key("not-published")),
        "none": lambda: github.forged(AUDIENCE, "none"),
        "HS256": lambda: github.forged(AUDIENCE, "HS256"),
    }[case]()
    result = _init(registry, tmp_path, token)
    assert result.returncode != 0
    refused = "403 Forbidden" if case == "other-repository" else "401 Unauthorized"
    assert refused in result.stderr
    status, body = _request(registry, "GET", "/v1/modules/acme/vpc/aws/versions", token)
    assert status == int(refused[:3])
    if case == "other-repository":
        assert body == {"errors": ["no workload identity rule matches this token"]}


def test_an_exchanged_token_installs_until_it_expires_and_cannot_publish(
    registry: Registry, issuers: WorkloadIssuers, tmp_path: Path
) -> None:
    kubernetes = issuers["kubernetes"]
    status, answer = _exchange(registry, kubernetes.sign(AUDIENCE))
    assert status == 200, answer
    assert answer["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    token = answer["access_token"]
    assert token.startswith("gitreg_")
    result = _init(registry, tmp_path / "one", token)
    assert result.returncode == 0, result.stderr
    status, _ = _request(registry, "POST", "/api/v1/providers/acme/ourcloud/1.0.0/uploads", token)
    assert status == 403  # its rule reads only
    # An ID token with 4 s left: the exchanged token lasts no longer.
    status, short = _exchange(registry, kubernetes.sign(AUDIENCE, now=time.time() - 296))
    assert status == 200 and short["expires_in"] <= 4
    time.sleep(short["expires_in"] + 1.5)
    expired = _init(registry, tmp_path / "two", short["access_token"])
    assert expired.returncode != 0
    assert "401 Unauthorized" in expired.stderr
    rows = _audit(registry, "--action", "sign_in.token_exchange")
    assert len(rows) == 2
    assert {r["actor"]["rule"] for r in rows} == {"workload_identity[3].rules[1]"}
    assert all("system:serviceaccount:ci:terraform" in r["actor"]["name"] for r in rows)


def test_a_token_no_rule_matches_is_refused_by_the_exchange(
    registry: Registry, issuers: WorkloadIssuers
) -> None:
    status, answer = _exchange(registry, issuers["github"].sign(AUDIENCE, repository="x/y"))
    assert status == 400
    assert answer == {
        "error": "invalid_request",
        "error_description": "no workload identity rule matches this token",
    }


def _publish(registry: Registry, tmp_path: Path, version: str, token: str) -> Any:
    dist = make_dist("ourcloud", version, ["linux_amd64"], b"#!/bin/sh\n", signer=None)
    del dist.files[dist.shasums_name]
    dist_dir = dist.write(tmp_path / f"dist-{version}")
    return cli(
        tmp_path / "ci-machine",
        "provider",
        "publish",
        "acme/ourcloud",
        version,
        str(dist_dir),
        "--sign",
        "--url",
        registry.server.url,
        "--ca-file",
        str(registry.server.ca_pem),
        env={"GITREG_TOKEN": token},
        check=False,
    )


def test_a_release_workflow_on_a_tag_publishes_and_a_pull_request_does_not(
    registry: Registry, issuers: WorkloadIssuers, tmp_path: Path
) -> None:
    github = issuers["github"]
    released = github.sign(AUDIENCE, repository="acme/provider-ourcloud", ref="refs/tags/v1.0.0")
    published = _publish(registry, tmp_path, "1.0.0", released)
    assert published.returncode == 0, published.stderr
    proposed = github.sign(
        AUDIENCE,
        repository="acme/provider-ourcloud",
        ref="refs/tags/v1.0.1",
        event_name="pull_request",
    )
    refused = _publish(registry, tmp_path, "1.0.1", proposed)
    assert refused.returncode != 0
    assert "403" in refused.stderr
    (row,) = _audit(registry, "--action", "provider.publish")
    assert (row["object"], row["result"]) == ("acme/ourcloud 1.0.0", "ok")
    assert row["actor"]["kind"] == "workload"
    assert row["actor"]["name"].endswith("repo:acme/provider-ourcloud:ref:refs/tags/v1.0.0")
    assert row["actor"]["rule"] == "workload_identity[1].rules[2], workload_identity[1].rules[3]"
    assert row["request_id"]
    pull_request = _audit(registry, "--actor", "provider-ourcloud:pull_request")
    assert [r["actor"]["rule"] for r in pull_request] == ["workload_identity[1].rules[3]"]


def test_a_sync_trigger_needs_a_publish_rule(registry: Registry, issuers: WorkloadIssuers) -> None:
    # hooks/post-receive's notification (docs/webhooks.md), from CI jobs.
    pushed = {
        "repository": "acme/terraform-aws-vpc",
        "refs": [{"ref": "refs/tags/v1.0.1", "old": "0" * 40, "new": "1" * 40}],
    }
    publisher = issuers["gitlab"].sign(AUDIENCE, ref="v1.0.1", ref_type="tag")
    status, answer = _request(registry, "POST", "/webhooks/git", publisher, body=pushed)
    assert status == 202, answer
    reader = issuers["github"].sign(AUDIENCE, repository="acme/infra-live")
    status, answer = _request(registry, "POST", "/webhooks/git", reader, body=pushed)
    assert status == 403, answer


def test_an_unreachable_issuer_is_503(registry: Registry) -> None:
    token = registry.lost.sign(AUDIENCE, repository="acme/infra-live")
    status, body = _request(registry, "GET", "/v1/modules/acme/vpc/aws/versions", token)
    assert status == 503
    assert "cannot be used" in body["errors"][0]


def test_the_admin_listing_pages_through_the_log(registry: Registry) -> None:
    cli(registry.data_dir, "namespace", "set", "acme", "--private")
    status, body = _request(registry, "GET", "/v1/admin/audit?limit=1", registry.admin_token)
    assert status == 200
    (newest,) = body["entries"]
    assert newest["action"] == "namespace.visibility"
    assert newest["actor"]["kind"] == "operator"
    status, older = _request(
        registry, "GET", f"/v1/admin/audit?limit=1000&before={body['next']}", registry.admin_token
    )
    assert status == 200
    assert {"token.create", "repository.add", "key.generate", "config.access"} <= {
        e["action"] for e in older["entries"]
    }
    status, _ = _request(registry, "GET", "/v1/admin/audit", registry.read_token)
    assert status == 403

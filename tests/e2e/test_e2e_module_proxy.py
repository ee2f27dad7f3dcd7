"""End to end: real Terraform installs a public-shaped module through gitreg's
pull-through cache, then again with the upstream registry and the
git server gone.

The upstream is a registry shaped like the public one answering
`X-Terraform-Get: git::https://127.0.0.1:PORT/org/repo.git?ref=v1.2.0`, and a
real git smart-HTTP server over TLS (tests/module_proxy/fakes.py). gitreg runs
as `gitreg serve` over TLS with a `[[module_proxy]]` table in its config file.
Terraform 1.0.3 (the PyPI binary) and the newest on PATH both install.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import tests.support.terraform as terraform
from tests.module_proxy.conftest import MODULE, Upstream, ca_pem, upstream_servers
from tests.support.server import RunningServer, cli, start_server
from tests.support.terraform import run_terraform


@dataclass
class Proxy:
    server: RunningServer
    upstream: Upstream
    data_dir: Path


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    root = tmp_path_factory.mktemp("e2e-module-proxy")
    with upstream_servers(root) as upstream:
        data_dir = root / "data"
        data_dir.mkdir()
        (data_dir / "gitreg.toml").write_text(
            "[[module_proxy]]\n"
            'host = "registry.terraform.io"\n'
            f'url = "{upstream.registry_url}"\n'
            f'namespaces = ["{MODULE[0]}"]\n'
        )
        # gitreg trusts the upstreams' CA through SSL_CERT_FILE, as in production.
        server = start_server(
            data_dir, "--reconcile-interval", "0", env={"SSL_CERT_FILE": str(ca_pem(root))}
        )
        try:
            yield Proxy(server, upstream, data_dir)
        finally:
            server.stop()


def _init(proxy: Proxy, workdir: Path, version: str = "1.2.0") -> dict[str, str]:
    workdir.mkdir(parents=True)
    source = f"{proxy.server.host}/{'/'.join(MODULE)}"
    (workdir / "main.tf").write_text(
        f'module "vpc" {{\n  source  = "{source}"\n  version = "{version}"\n}}\n\n'
        'output "greeting" {\n  value = module.vpc.greeting\n}\n'
    )
    started = time.monotonic()
    run_terraform(workdir, "init", ca_pem=proxy.server.ca_pem)
    print(f"terraform init {workdir.name}: {time.monotonic() - started:.2f}s")  # a measurement
    manifest = json.loads((workdir / ".terraform/modules/modules.json").read_text())
    return next(m for m in manifest["Modules"] if m["Key"] == "vpc")


@pytest.fixture(params=["1.0.3", "newest"])
def terraform_version(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "newest":
        found = shutil.which("terraform")
        if found is None:
            pytest.skip("no terraform on PATH")
        monkeypatch.setattr(terraform, "terraform_binary", lambda: Path(found))
    return str(request.param)


def test_terraform_installs_through_the_proxy_then_offline(
    proxy: Proxy, tmp_path: Path, terraform_version: str
) -> None:
    installed = _init(proxy, tmp_path / "online")
    assert installed["Version"] == "1.2.0"
    assert "greeting" in (tmp_path / "online" / installed["Dir"] / "main.tf").read_text()
    applied = run_terraform(
        tmp_path / "online", "apply", "-auto-approve", ca_pem=proxy.server.ca_pem
    )
    assert 'greeting = "hello"' in applied.stdout

    proxy.upstream.registry.down = True
    saved = dict(proxy.upstream.git.repos)
    proxy.upstream.git.repos.clear()
    try:
        offline = _init(proxy, tmp_path / "offline")
        assert offline["Version"] == "1.2.0"
    finally:
        proxy.upstream.registry.down = False
        proxy.upstream.git.repos.update(saved)


def test_a_hostile_location_answers_502_json(proxy: Proxy) -> None:
    proxy.upstream.registry.modules[MODULE]["6.6.6"] = (
        "git::https://169.254.169.254/latest/meta-data.git?ref=v6.6.6"
    )
    url = f"{proxy.server.url}/v1/modules/{'/'.join(MODULE)}/6.6.6/download"
    answer = httpx.get(url, verify=proxy.server.ssl_context())
    assert answer.status_code == 502
    assert "refused" in answer.json()["errors"][0]
    listed = cli(proxy.data_dir, "modules", "proxied").stdout
    assert "6.6.6" not in listed and "1.2.0" in listed


def test_a_moved_tag_serves_the_first_bytes_and_is_reported(proxy: Proxy, tmp_path: Path) -> None:
    url = f"{proxy.server.url}/v1/modules/{'/'.join(MODULE)}/1.2.0/download"
    context = proxy.server.ssl_context()
    before = httpx.get(url, verify=context).headers["x-terraform-get"]
    up = proxy.upstream
    up.work.write("main.tf", 'output "greeting" {\n  value = "moved"\n}\n')
    moved_to = up.work.commit("moved")
    up.work.tag("v1.2.0", annotated=True, force=True)
    up.push()
    env = {"SSL_CERT_FILE": str(ca_pem(up.tls_dir.parent))}
    checked = cli(proxy.data_dir, "modules", "proxied", "--check", env=env, check=False)
    assert checked.returncode == 1 and moved_to[:12] in checked.stdout
    assert "moved upstream tag(s) of cached modules" in cli(proxy.data_dir, "jobs").stdout
    token = cli(proxy.data_dir, "token", "create", "--scope", "admin").stdout.split()[-1]
    deadline = time.monotonic() + 30
    while True:  # until the server has read the new token
        answer = httpx.get(
            f"{proxy.server.url}/admin/conflicts",
            headers={"Authorization": f"Bearer {token}"},
            verify=context,
        )
        if answer.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    [move] = answer.json()["module_proxy_moves"]
    assert move["upstream_commit"] == moved_to and move["version"] == "1.2.0"
    assert httpx.get(url, verify=context).headers["x-terraform-get"] == before
    installed = _init(proxy, tmp_path / "after-move")
    assert "moved" not in (tmp_path / "after-move" / installed["Dir"] / "main.tf").read_text()


def test_a_private_proxied_namespace_needs_a_token(proxy: Proxy) -> None:
    base = f"{proxy.server.url}/v1/modules/{'/'.join(MODULE)}"
    context = proxy.server.ssl_context()
    cli(proxy.data_dir, "namespace", "set", MODULE[0], "--private")
    try:
        deadline = time.monotonic() + 30  # the server notices the change on its next refresh
        while httpx.get(f"{base}/versions", verify=context).status_code == 200:
            assert time.monotonic() < deadline, "the namespace never became private"
            time.sleep(0.1)
        for path in ("/versions", "/1.2.0/download", "/7.7.7/download"):
            answer = httpx.get(base + path, verify=context)
            assert answer.status_code in (401, 404) and "errors" in answer.json()
        token = cli(
            proxy.data_dir, "token", "create", "--scope", "read", "--namespace", MODULE[0]
        ).stdout.split()[-1]
        auth = {"Authorization": f"Bearer {token}"}
        answer = httpx.get(f"{base}/1.2.0/download", headers=auth, verify=context)
        while answer.status_code != 204:  # until the server has read the new token
            assert time.monotonic() < deadline + 30, answer.text
            time.sleep(0.1)
            answer = httpx.get(f"{base}/1.2.0/download", headers=auth, verify=context)
        location = answer.headers["x-terraform-get"]
        assert "/archives/" in location and "?" in location  # a signed archive URL
        assert httpx.get(location, verify=context).status_code == 200
    finally:
        cli(proxy.data_dir, "namespace", "set", MODULE[0], "--public")

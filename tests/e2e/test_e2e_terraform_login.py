"""End to end: the real `terraform login` against a real `gitreg serve` over TLS,
signing in at a real OpenID Provider (oidc-provider, tests/support/oidc_provider.py).

Terraform opens "the browser" through xdg-open (pkg/browser), and xdg-open
honours $BROWSER: both point at tests/support/oidc_browser.py, which completes
the provider's login and consent forms as the person the test names and lets
the last redirect reach Terraform's loopback listener. Terraform's "Do you
want to proceed?" is answered "yes" on stdin. Runs with Terraform 1.0.3 (the
test extra) and with the newest Terraform on PATH when there is one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo, simple_module
from tests.support.oidc_provider import oidc_provider
from tests.support.server import RunningServer, cli, free_port, start_server
from tests.support.terraform import terraform_binary

ROOT = Path(__file__).parents[2]
GRANTS = """
[[grants]]
group = "platform-team"
namespace = "platform"
scope = "read"
"""


def _binaries() -> list[Path]:
    binaries = [terraform_binary()]
    newest = shutil.which("terraform")
    if newest and Path(newest).resolve() != binaries[0].resolve():
        binaries.append(Path(newest))
    return binaries


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("e2e-login")
    data_dir = root / "data"
    repo = GitRepo(root / "vpc")
    simple_module(repo, "hello platform")
    repo.commit()
    repo.tag("v1.0.0")
    cli(data_dir, "repo", "add", str(repo.path), "--module", "platform/vpc/aws")
    cli(data_dir, "namespace", "set", "platform", "--private")
    config = root / "gitreg.toml"
    config.write_text(GRANTS)
    port = free_port()
    with oidc_provider(f"https://127.0.0.1:{port}/oauth/callback") as idp:
        running = start_server(data_dir, "--config", str(config), port=port, env=idp.gitreg_env())
        try:
            yield running
        finally:
            running.stop()


def _browser(bin_dir: Path, log: Path) -> Path:
    """An executable `xdg-open` that is our scripted browser."""
    bin_dir.mkdir()
    script = bin_dir / "xdg-open"
    script.write_text(
        "#!/bin/sh\n"
        # In the background: Terraform waits for xdg-open to exit before it
        # serves the loopback redirect this browser ends with.
        f"cd '{ROOT}' && PYTHONPATH='{ROOT}' '{sys.executable}'"
        f" -m tests.support.oidc_browser \"$@\" >> '{log}' 2>&1 &\n"
    )
    script.chmod(0o755)
    return script


def _env(workdir: Path, server: RunningServer) -> dict[str, str]:
    # Only HOME isolates: with TF_CLI_CONFIG_FILE set, Terraform does not read
    # ~/.terraform.d/credentials.tfrc.json, the file `terraform login` writes.
    home = workdir / ".home"
    (home / ".terraform.d").mkdir(parents=True, exist_ok=True)  # Terraform does not create it
    env = {
        "PATH": f"{workdir / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "CHECKPOINT_DISABLE": "1",
        "SSL_CERT_FILE": str(server.ca_pem),
        "BROWSER": str(workdir / "bin" / "xdg-open"),
        "GITREG_TEST_CA": str(server.ca_pem),
        "GITREG_TEST_LOGIN": workdir.name.split("-")[0],  # who signs in: alice-work, bob-work
    }
    env.update({k: v for k, v in os.environ.items() if k in ("TF_LOG", "TF_LOG_PATH")})
    return env


def _terraform(
    binary: Path, workdir: Path, server: RunningServer, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binary), *args],
        cwd=workdir,
        env=_env(workdir, server),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
    )


@dataclass
class Attempt:
    result: subprocess.CompletedProcess[str]
    credentials: Path
    browser_log: Path


def _login(binary: Path, workdir: Path, server: RunningServer) -> Attempt:
    log = workdir / "browser.log"
    _browser(workdir / "bin", log)
    result = _terraform(binary, workdir, server, "login", "-no-color", server.host, stdin="yes\n")
    credentials = workdir / ".home" / ".terraform.d" / "credentials.tfrc.json"
    return Attempt(result, credentials, log)


@pytest.mark.parametrize("binary", _binaries(), ids=lambda b: str(b))
def test_terraform_login_then_init_of_a_private_module(
    binary: Path, server: RunningServer, tmp_path: Path
) -> None:
    workdir = tmp_path / "alice-work"
    workdir.mkdir()
    attempt = _login(binary, workdir, server)
    output = attempt.result.stdout + attempt.result.stderr
    log = attempt.browser_log.read_text() if attempt.browser_log.exists() else ""
    assert attempt.result.returncode == 0, f"{output}\nbrowser:\n{log}"
    token = json.loads(attempt.credentials.read_text())["credentials"][server.host]["token"]
    assert token.startswith("gitreg_")
    (workdir / "main.tf").write_text(
        f'module "vpc" {{\n  source  = "{server.host}/platform/vpc/aws"\n'
        '  version = "1.0.0"\n}\n\noutput "greeting" {\n  value = module.vpc.greeting\n}\n'
    )
    init = _terraform(binary, workdir, server, "init", "-no-color")
    assert init.returncode == 0, init.stdout + init.stderr
    assert "Downloading" in init.stdout and "platform/vpc/aws 1.0.0" in init.stdout


def test_bob_outside_the_granted_groups_gets_a_clean_refusal(
    server: RunningServer, tmp_path: Path
) -> None:
    """Terraform cannot learn of a refusal (its listener answers a callback
    without `code` with a bare 400 and waits), so the refusal is gitreg's page
    in the browser; the test then stops Terraform as the person would."""
    workdir = tmp_path / "bob-work"
    workdir.mkdir()
    log = workdir / "browser.log"
    _browser(workdir / "bin", log)
    process = subprocess.Popen(
        [str(terraform_binary()), "login", "-no-color", server.host],
        cwd=workdir,
        env=_env(workdir, server),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Its own process group: Terraform runs as a parent and a child
        # (panicwrap), and both must go.
        start_new_session=True,
    )
    try:
        assert process.stdin is not None
        process.stdin.write("yes\n")
        process.stdin.flush()
        deadline = time.monotonic() + 120
        while "status=" not in (log.read_text() if log.exists() else ""):
            assert process.poll() is None, "terraform login ended before the browser did"
            assert time.monotonic() < deadline, "the browser never reached a page"
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C
        try:
            process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    page = log.read_text()
    assert "/oauth/callback?" in page and "status=403" in page
    assert "bob@example.com has no access to this registry" in page
    assert not (workdir / ".home" / ".terraform.d" / "credentials.tfrc.json").exists()

"""End to end: `git push --tags` publishes, with no manual sync.

Real bare repositories with hooks/post-receive installed, the git CLI pushing,
`gitreg serve` over TLS, signed forge-style webhooks, kill -9 and restart, a
burst of deliveries to two server processes, and the real Terraform CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gitreg.services import build_services
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo, git, simple_module
from tests.support.server import RunningServer, cli
from tests.support.terraform import run_terraform
from tests.support.webhooks import Prepared, delivery

HOOK = Path(__file__).resolve().parents[2] / "hooks" / "post-receive"
SECRET = "e2e-webhook-secret"
PUBLISH_DEADLINE = 60.0  # generous for a loaded CI machine; measured times are far lower

Servers = Callable[..., RunningServer]


def bare_remote(work: GitRepo, path: Path, hook: bool) -> Path:
    """A bare repository `work` pushes to as `origin`, optionally with our hook."""
    path.parent.mkdir(parents=True, exist_ok=True)
    git(path.parent, "init", "-q", "--bare", "-b", "main", str(path))
    if hook:
        shutil.copy(HOOK, path / "hooks" / "post-receive")
        (path / "hooks" / "post-receive").chmod(0o755)
    git(work.path, "remote", "add", "origin", str(path))
    return path


def configure_hook(bare: Path, server: RunningServer, token: str, tmp_path: Path) -> None:
    token_file = tmp_path / "notify-token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    git(bare, "config", "gitreg.url", server.url)
    git(bare, "config", "gitreg.tokenFile", str(token_file))
    git(bare, "config", "gitreg.cacert", str(server.ca_pem))


def push(work: GitRepo, *refs: str) -> subprocess.CompletedProcess[str]:
    from tests.support.gitrepo import GIT_ENV

    return subprocess.run(
        ["git", "push", "origin", *refs],
        cwd=work.path,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        timeout=120,
    )


def versions(server: RunningServer, address: str) -> list[str]:
    url = f"{server.url}/v1/modules/{address}/versions"
    try:
        with urllib.request.urlopen(url, context=server.ssl_context(), timeout=5) as answer:
            body = json.loads(answer.read())
    except urllib.error.HTTPError as error:
        error.close()  # its socket would otherwise leak (ResourceWarning)
        return []
    return [v["version"] for v in body["modules"][0]["versions"]]


def wait_for_version(server: RunningServer, address: str, version: str) -> float:
    """Seconds until `version` is listed."""
    started = time.monotonic()
    while version not in versions(server, address):
        assert time.monotonic() - started < PUBLISH_DEADLINE, server.log()[-3000:]
        time.sleep(0.05)
    return time.monotonic() - started


def post(server: RunningServer, prepared: Prepared) -> tuple[int, dict[str, object], float]:
    request = urllib.request.Request(
        server.url + prepared.route, data=prepared.body, headers=prepared.headers, method="POST"
    )
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, context=server.ssl_context(), timeout=30) as answer:
            status, body = answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        with error:
            status, body = error.code, json.loads(error.read())
    return status, body, time.monotonic() - started


def terraform_installs(server: RunningServer, address: str, version: str, workdir: Path) -> None:
    workdir.mkdir(parents=True)
    (workdir / "main.tf").write_text(
        f'module "m" {{\n  source  = "{server.host}/{address}"\n  version = "{version}"\n}}\n\n'
        'output "greeting" {\n  value = module.m.greeting\n}\n'
    )
    run_terraform(workdir, "init", ca_pem=server.ca_pem)
    manifest = json.loads((workdir / ".terraform/modules/modules.json").read_text())
    installed = next(m for m in manifest["Modules"] if m["Key"] == "m")
    assert installed["Version"] == version
    applied = run_terraform(workdir, "apply", "-auto-approve", ca_pem=server.ca_pem)
    assert f'greeting = "{version}"' in applied.stdout


def module_repo(path: Path, version: str) -> GitRepo:
    work = GitRepo(path)
    simple_module(work, output=version)
    work.commit(f"release {version}")
    return work


# -- hooks/post-receive ------------------------------------------------------


def test_git_push_of_a_tag_becomes_installable(servers: Servers, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    work = module_repo(tmp_path / "work", "1.0.0")
    bare = bare_remote(work, tmp_path / "git" / "acme" / "greeting.git", hook=True)
    push(work, "main")
    cli(data_dir, "repo", "add", str(bare), "--module", "acme/greeting/null", "--no-sync")
    created = cli(data_dir, "token", "create", "--scope", "publish", "--namespace", "acme")
    token = created.stdout.strip().splitlines()[-1]
    server = servers(data_dir, "--reconcile-interval", "0")
    configure_hook(bare, server, token, tmp_path)

    work.tag("v1.0.0")
    pushed = push(work, "v1.0.0")
    assert pushed.returncode == 0, pushed.stderr
    assert "gitreg: notified" in pushed.stderr
    seconds = wait_for_version(server, "acme/greeting/null", "1.0.0")
    print(f"git push -> listed: {seconds:.2f}s")
    terraform_installs(server, "acme/greeting/null", "1.0.0", tmp_path / "tf")

    listing = json.loads(cli(data_dir, "jobs", "list", "--json").stdout)
    assert [(j["source"], j["state"]) for j in listing["jobs"]] == [("hook", "done")]
    # The token is never logged.
    assert token not in server.log()


def test_hook_never_fails_a_push(tmp_path: Path) -> None:
    work = module_repo(tmp_path / "work", "1.0.0")
    bare = bare_remote(work, tmp_path / "git" / "acme" / "down.git", hook=True)

    # Not configured: the push works and says why nothing was announced.
    work.tag("v0.1.0")
    pushed = push(work, "main", "v0.1.0")
    assert pushed.returncode == 0, pushed.stderr
    assert "gitreg.url is not set" in pushed.stderr

    # Configured, but gitreg is down.
    token_file = tmp_path / "token"
    token_file.write_text("gitreg_hook_whatever\n")
    git(bare, "config", "gitreg.url", "https://127.0.0.1:9")
    git(bare, "config", "gitreg.tokenFile", str(token_file))
    work.tag("v0.2.0")
    started = time.monotonic()
    pushed = push(work, "v0.2.0")
    print(f"push with gitreg down: {time.monotonic() - started:.2f}s")
    assert pushed.returncode == 0, pushed.stderr
    assert "gitreg: could not notify" in pushed.stderr
    assert "could not notify" in (bare / "gitreg-hook.log").read_text()
    assert "gitreg_hook_whatever" not in pushed.stderr

    # Branch pushes are none of gitreg's business.
    work.commit("more")
    pushed = push(work, "main")
    assert pushed.returncode == 0 and "gitreg" not in pushed.stderr


# -- signed forge webhook ----------------------------------------------------


def test_signed_github_webhook_publishes(servers: Servers, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    work = module_repo(tmp_path / "work", "2.1.0")
    bare = bare_remote(work, tmp_path / "git" / "acme" / "terraform-null-hello.git", hook=False)
    push(work, "main")
    forge_repo = "acme/terraform-null-hello"
    add = ["repo", "add", str(bare), "--module", "acme/hello/null", "--no-sync"]
    cli(data_dir, *add, "--forge-repo", forge_repo, "--webhook-secret", SECRET)
    server = servers(data_dir, "--reconcile-interval", "0")
    work.tag("v2.1.0", annotated=True)
    assert push(work, "v2.1.0").returncode == 0
    after = work.rev("v2.1.0^{commit}")
    prepared = delivery(
        "github", "push-tag-created", repo=forge_repo, tag="v2.1.0", after=after, secret=SECRET
    )
    status, body, seconds = post(server, prepared)
    print(f"webhook answered in {seconds * 1000:.0f} ms")
    assert status == 202, body
    wait_for_version(server, "acme/hello/null", "2.1.0")
    terraform_installs(server, "acme/hello/null", "2.1.0", tmp_path / "tf")
    status, body, _ = post(server, prepared)  # GitHub's "Redeliver"
    assert (status, body["status"]) == (200, "duplicate")


# -- kill -9 between accepting a delivery and finishing its job ---------------


FAKE_SSH = """#!/bin/sh
# Stands in for ssh: runs the git command locally, or hangs while {flag} exists.
for command; do :; done
if [ -e "{flag}" ]; then
    echo $$ > "{pidfile}"
    exec sleep 600
fi
exec sh -c "$command"
"""


def hanging_ssh(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """PATH with a fake ssh that hangs while the returned flag file exists and
    writes its pid to the returned pidfile; create the flag to make it hang."""
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    flag, pidfile = tmp_path / "hang", tmp_path / "ssh.pid"
    (fakebin / "ssh").write_text(FAKE_SSH.format(flag=flag, pidfile=pidfile))
    (fakebin / "ssh").chmod(0o755)
    return {"PATH": f"{fakebin}:{os.environ['PATH']}"}, flag, pidfile


def test_job_survives_kill_9_and_publishes_once(servers: Servers, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    work = module_repo(tmp_path / "work", "3.0.0")
    bare = bare_remote(work, tmp_path / "git" / "acme" / "slow.git", hook=False)
    work.tag("v3.0.0")
    assert push(work, "main", "v3.0.0").returncode == 0
    # An ssh remote whose server hangs until told otherwise.
    env, flag, pidfile = hanging_ssh(tmp_path)
    add = ["repo", "add", f"ssh://git.example.test{bare}", "--module", "acme/slow/null"]
    cli(data_dir, *add, "--no-sync", "--forge-repo", "acme/slow", "--webhook-secret", SECRET)
    flag.touch()
    first = servers(data_dir, "--reconcile-interval", "0", env=env)
    prepared = delivery("gitea", "push-tag-created", repo="acme/slow", tag="v3.0.0", secret=SECRET)
    status, _, seconds = post(first, prepared)
    print(f"webhook answered in {seconds * 1000:.0f} ms while the git server hangs")
    assert status == 202
    deadline = time.monotonic() + PUBLISH_DEADLINE
    while not pidfile.exists():  # the job is running: the fetch has started and hangs
        assert time.monotonic() < deadline, first.log()
        time.sleep(0.05)
    another = delivery("gitea", "create-tag", repo="acme/slow", secret=SECRET)
    status, _, seconds = post(first, another)
    print(f"second webhook answered in {seconds * 1000:.0f} ms while the git server hangs")
    assert status == 202

    first.stop(kill=True)
    os.kill(int(pidfile.read_text()), signal.SIGKILL)  # the orphaned "ssh"
    flag.unlink()
    second = servers(data_dir, "--reconcile-interval", "0", env=env)
    wait_for_version(second, "acme/slow/null", "3.0.0")

    deadline = time.monotonic() + PUBLISH_DEADLINE
    while True:
        listing = json.loads(cli(data_dir, "jobs", "list", "--json").stdout)
        if not listing["counts"]["queued"] and not listing["counts"]["running"]:
            break
        assert time.monotonic() < deadline, second.log()
        time.sleep(0.1)
    states = sorted((j["state"], j["attempts"]) for j in listing["jobs"])
    # The interrupted job ran again (attempt 2); the delivery that arrived while
    # it hung ran once after it. Neither failed.
    assert states == [("done", 1), ("done", 2)], listing
    modules = json.loads(cli(data_dir, "modules", "--json").stdout)
    assert [v["version"] for v in modules[0]["versions"]] == ["3.0.0"]


# -- a burst of deliveries to two server processes ----------------------------


REPOS = 20
PER_REPO = 10  # 200 deliveries; every fifth one repeats an earlier delivery id
FORGE_FIXTURES = [
    ("github", "push-tag-created"),
    ("gitlab", "tag-push-created"),
    ("gitea", "push-tag-created"),
    ("bitbucket", "cloud-push-tag-created"),
]


def test_burst_of_200_deliveries_for_20_repositories(servers: Servers, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    settings = load_settings({"data_dir": data_dir}, environ={})
    svc = build_services(settings)
    for number in range(REPOS):
        work = module_repo(tmp_path / "work" / f"r{number}", "1.0.0")
        work.tag("v1.0.0")
        work.commit("second")
        work.tag("v1.1.0", annotated=True)
        record = svc.index.add_repo(str(work.path), f"burst/r{number}", SECRET)
        svc.index.add_module(record.id, "burst", f"r{number}", "null", "", "")
    svc.close()
    # Two processes on one data dir: each job must still run exactly once.
    one = servers(data_dir, "--reconcile-interval", "0")
    two = servers(data_dir, "--reconcile-interval", "0")

    deliveries: list[tuple[RunningServer, Prepared]] = []
    for number in range(REPOS):
        for k in range(PER_REPO):
            forge, fixture = FORGE_FIXTURES[(number + k) % len(FORGE_FIXTURES)]
            if k % 5 == 4:  # a redelivery of the previous one
                deliveries.append(deliveries[-1])
                continue
            prepared = delivery(
                forge,
                fixture,
                repo=f"burst/r{number}",
                tag=f"v1.{k % 2}.0",
                delivery_id=f"burst-{number}-{k}",
                secret=SECRET,
            )
            deliveries.append((one if k % 2 else two, prepared))
    assert len(deliveries) == REPOS * PER_REPO

    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(lambda d: post(*d), deliveries))
    statuses = [status for status, _, _ in answers]
    assert set(statuses) <= {200, 202}, [a for a in answers if a[0] not in (200, 202)]
    latencies = sorted(seconds for _, _, seconds in answers)
    print(
        f"burst: median {statistics.median(latencies) * 1000:.0f} ms,"
        f" p95 {latencies[int(len(latencies) * 0.95)] * 1000:.0f} ms,"
        f" max {latencies[-1] * 1000:.0f} ms"
    )

    svc = build_services(settings)
    try:
        deadline = time.monotonic() + PUBLISH_DEADLINE
        while (c := svc.job_queue.store.counts())["queued"] or c["running"]:
            assert time.monotonic() < deadline, c
            time.sleep(0.1)
        jobs = svc.job_queue.store.jobs(limit=1000)
        assert {j.state for j in jobs} == {"done"}, [j.to_json() for j in jobs if j.state != "done"]
        assert all(j.attempts == 1 for j in jobs), "a job ran twice"
        # Every delivery id was recorded once; the repeats were recognised.
        assert svc.job_queue.store.delivery_count() == REPOS * PER_REPO * 4 // 5
        for number in range(REPOS):
            module = svc.index.find_module("burst", f"r{number}", "null")
            assert module is not None
            assert sorted(v.version for v in svc.index.versions(module.id)) == ["1.0.0", "1.1.0"]
    finally:
        svc.close()
    for server in (one, two):
        log = server.log()
        assert "database is locked" not in log
        assert "Traceback" not in log


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """urllib must reach 127.0.0.1 directly."""
    for name in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)

"""Every metric moves when its event happens, on a real `gitreg
serve` over TLS: a signed GitHub webhook for a real git tag (job, publish,
archive, blob), a webhook for a repository whose remote is gone (retries and a
failure), downloads, the mirror pulling through a fake upstream over TLS (and
serving stale while it is down), bad tokens, and a scan of random paths."""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from gitreg.locks import file_lock
from tests.metrics.scrape import Samples, fetch, label_values, parse, value, wait_for
from tests.support.fake_upstream import FakeUpstream, ServedUpstream, serve_tls
from tests.support.gitrepo import GitRepo, git, simple_module
from tests.support.provider_dist import make_dist
from tests.support.server import RunningServer, cli, start_server
from tests.support.webhooks import delivery

SECRET = "metrics-webhook-secret"
MIRROR = "/mirror/registry.terraform.io/hashicorp/null"


@dataclass
class World:
    server: RunningServer
    upstream: ServedUpstream
    work: GitRepo
    admin: str
    reader: str

    def scrape(self) -> Samples:
        status, text = fetch(self.server.url + "/metrics", self.admin, self.server.ssl_context())
        assert status == 200, text
        return parse(text)

    def get(self, path: str) -> tuple[int, bytes]:
        request = urllib.request.Request(self.server.url + path)
        try:
            with urllib.request.urlopen(request, context=self.server.ssl_context()) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as error:
            with error:
                return error.code, error.read()

    def post(self, route: str, body: bytes, headers: dict[str, str]) -> int:
        request = urllib.request.Request(
            self.server.url + route, data=body, headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, context=self.server.ssl_context()) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as error:
            with error:
                return int(error.code)


def _token(data_dir: Path, *args: str) -> str:
    return cli(data_dir, "token", "create", *args).stdout.strip().splitlines()[-1]


def _repo(root: Path, name: str) -> tuple[GitRepo, Path]:
    work = GitRepo(root / "work" / name)
    simple_module(work, "hello")
    work.commit()
    bare = root / "git" / f"{name}.git"
    bare.parent.mkdir(parents=True, exist_ok=True)
    git(bare.parent, "init", "-q", "--bare", "-b", "main", str(bare))
    git(work.path, "remote", "add", "origin", str(bare))
    git(work.path, "push", "-q", "origin", "main")
    return work, bare


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("metrics")
    data = root / "data"
    fake = FakeUpstream()
    # Incompressible bytes: the zip streams while it arrives (all but its last
    # 64 KiB before it is verified), so a GET can be seen joining its fill.
    fake.add("hashicorp", "null", ["3.0.0"], noise=1_500_000)
    work, _ = _repo(root, "terraform-null-hello")
    _, broken = _repo(root, "terraform-null-broken")
    for name, module in (("hello", "acme/hello/null"), ("broken", "acme/broken/null")):
        forge = f"acme/terraform-null-{name}"
        remote = root / "git" / f"terraform-null-{name}.git"
        add = ["repo", "add", str(remote), "--module", module, "--no-sync"]
        cli(data, *add, "--forge-repo", forge, "--webhook-secret", SECRET)
    shutil.rmtree(broken)  # its fetches now fail: retried, then failed
    admin = _token(data, "--scope", "admin")
    reader = _token(data, "--scope", "read", "--namespace", "acme")
    with serve_tls(fake, root / "upstream-tls") as upstream:
        env = {
            "SSL_CERT_FILE": str(upstream.ca_pem),
            "GITREG_UPSTREAM": f"registry.terraform.io={upstream.url}",
            "GITREG_MIRROR_PLATFORMS": "linux_amd64",
            "GITREG_MIRROR_INDEX_TTL": "0",  # every list read asks the upstream
            "GITREG_JOB_BACKOFF": "0",
            "GITREG_JOB_MAX_ATTEMPTS": "2",
        }
        server = start_server(data, "--reconcile-interval", "0", env=env)
        try:
            yield World(server, upstream, work, admin, reader)
        finally:
            server.stop()


def test_the_admin_token_gate_counts_failures(world: World) -> None:
    url, context = world.server.url + "/metrics", world.server.ssl_context()
    before = world.scrape()
    assert fetch(url, None, context)[0] == 401
    assert fetch(url, "gitreg_" + "x" * 43, context)[0] == 401
    assert fetch(url, world.reader, context)[0] == 403
    after = world.scrape()
    failed = value(after, "gitreg_auth_failures_total", kind="token")
    assert failed == value(before, "gitreg_auth_failures_total", kind="token") + 1
    assert value(after, "gitreg_http_requests_total", route="/metrics", status="401") >= 2


def test_a_webhook_publish_moves_jobs_publishes_archives_blobs_and_cache(world: World) -> None:
    assert world.get("/v1/modules/acme/hello/null/versions")[0] == 200  # a cache entry
    before = world.scrape()
    world.work.tag("v1.0.0")
    git(world.work.path, "push", "-q", "origin", "v1.0.0")
    prepared = delivery(
        "github",
        "push-tag-created",
        repo="acme/terraform-null-hello",
        tag="v1.0.0",
        after=world.work.rev("v1.0.0^{commit}"),
        secret=SECRET,
    )
    assert world.post(prepared.route, prepared.body, prepared.headers) == 202

    def published(s: Samples) -> bool:
        return value(s, "gitreg_jobs_finished_total", result="done") > value(
            before, "gitreg_jobs_finished_total", result="done"
        )

    after = wait_for(world.scrape, published)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("gitreg_webhook_deliveries_total", forge="github", result="queued") == 1
    assert moved("gitreg_jobs_queued_total", kind="sync") == 1
    assert moved("gitreg_jobs_finished_total", result="done") == 1
    assert moved("gitreg_job_duration_seconds_count", result="done") == 1
    assert moved("gitreg_publishes_total", kind="module") == 1
    assert label_values(after, "gitreg_publishes_total", "module") == {""}  # no module names
    assert moved("gitreg_archive_build_seconds_count") == 1
    assert moved("gitreg_blob_written_bytes_total") > 0
    assert moved("gitreg_cache_evictions_total", reason="invalidated") >= 1
    # The gauges: nothing runs now, and the queue's depth as the runner last read it.
    assert value(after, "gitreg_jobs_running") == 0
    after = wait_for(world.scrape, lambda s: value(s, "gitreg_job_queue", state="done") >= 1)
    assert value(after, "gitreg_job_queue", state="done") >= 1

    status, body = world.get("/v1/modules/acme/hello/null/1.0.0/download")
    assert status == 204 or status == 200, body
    assert value(world.scrape(), "gitreg_cache_entries") >= 1


def test_downloads_and_blob_bytes_served(world: World) -> None:
    samples = wait_for(
        world.scrape, lambda s: value(s, "gitreg_publishes_total", kind="module") >= 1
    )
    request = urllib.request.Request(
        world.server.url + "/v1/modules/acme/hello/null/1.0.0/download"
    )
    with urllib.request.urlopen(request, context=world.server.ssl_context()) as answer:
        location = answer.headers["X-Terraform-Get"]
    before = samples
    status, archive = world.get(urlsplit(location).path)
    assert status == 200
    after = world.scrape()
    assert value(after, "gitreg_downloads_total", kind="module") > value(
        before, "gitreg_downloads_total", kind="module"
    )
    served = value(after, "gitreg_blob_served_bytes_total")
    assert served - value(before, "gitreg_blob_served_bytes_total") == len(archive)


def test_failing_jobs_are_retried_then_failed(world: World) -> None:
    before = world.scrape()
    prepared = delivery(
        "github", "push-tag-created", repo="acme/terraform-null-broken", secret=SECRET
    )
    assert world.post(prepared.route, prepared.body, prepared.headers) == 202
    after = wait_for(
        world.scrape,
        lambda s: (
            value(s, "gitreg_jobs_finished_total", result="failed")
            > value(before, "gitreg_jobs_finished_total", result="failed")
        ),
    )
    for result in ("retried", "failed"):
        moved = value(after, "gitreg_jobs_finished_total", result=result) - value(
            before, "gitreg_jobs_finished_total", result=result
        )
        assert moved == 1, result


def test_rejected_webhooks_count_as_failed_authentication(world: World) -> None:
    before = world.scrape()
    prepared = delivery(
        "github", "push-tag-created", repo="acme/terraform-null-hello", secret="wrong"
    )
    assert world.post(prepared.route, prepared.body, prepared.headers) == 401
    after = wait_for(
        world.scrape,
        lambda s: (
            value(s, "gitreg_webhook_deliveries_total", result="rejected")
            > value(before, "gitreg_webhook_deliveries_total", result="rejected")
        ),
    )
    assert value(after, "gitreg_webhook_deliveries_total", forge="github", result="rejected") == (
        value(before, "gitreg_webhook_deliveries_total", forge="github", result="rejected") + 1
    )
    assert value(after, "gitreg_auth_failures_total", kind="webhook") == (
        value(before, "gitreg_auth_failures_total", kind="webhook") + 1
    )


def test_mirror_hits_misses_bytes_stale_and_upstream_errors(world: World) -> None:
    before = world.scrape()
    fake = world.upstream.upstream
    fake.gate = threading.Event()  # the zip stops at its middle until set
    try:
        status, body = world.get(f"{MIRROR}/3.0.0.json")  # starts the package's fill
        assert status == 200, body
        url = world.server.url + f"{MIRROR}/" + json.loads(body)["archives"]["linux_amd64"]["url"]
        with urllib.request.urlopen(url, context=world.server.ssl_context()) as answer:
            zipped = answer.read(1)  # this GET joined the fill in flight: no second miss
            fake.gate.set()
            zipped += answer.read()
    finally:
        fake.gate.set()
        fake.gate = None
    head = urllib.request.Request(url, method="HEAD")  # answers once the package is stored
    with urllib.request.urlopen(head, context=world.server.ssl_context()) as answer:
        assert int(answer.headers["content-length"]) == len(zipped)
    assert world.get(url.removeprefix(world.server.url)) == (200, zipped)  # a hit
    middle = world.scrape()

    def moved(samples: Samples, name: str, **labels: str) -> float:
        return value(samples, name, **labels) - value(before, name, **labels)

    assert moved(middle, "gitreg_mirror_misses_total", what="index") >= 1
    assert moved(middle, "gitreg_mirror_misses_total", what="package") == 1
    assert moved(middle, "gitreg_mirror_hits_total", what="package") >= 1
    assert moved(middle, "gitreg_mirror_upstream_bytes_total") >= len(zipped)
    assert moved(middle, "gitreg_blob_served_bytes_total") >= len(zipped)

    world.upstream.upstream.faults["*"] = "down"
    try:
        assert world.get(f"{MIRROR}/index.json")[0] == 200  # the last good list
    finally:
        world.upstream.upstream.faults.clear()
    after = world.scrape()
    assert moved(after, "gitreg_mirror_stale_served_total") == 1
    assert moved(after, "gitreg_upstream_errors_total", kind="status") == 1


def test_a_scan_of_random_paths_adds_at_most_one_route_value(world: World) -> None:
    before = label_values(world.scrape(), "gitreg_http_requests_total", "route")
    for _ in range(200):
        assert world.get("/" + secrets.token_hex(6) + "/" + secrets.token_hex(4))[0] == 404
    after = world.scrape()
    assert len(label_values(after, "gitreg_http_requests_total", "route") - before) <= 1
    assert value(after, "gitreg_http_requests_total", route="(no route)", status="404") >= 200
    assert value(after, "gitreg_http_request_duration_seconds_count", route="(no route)") >= 200


@pytest.mark.slow
def test_provider_publish_and_download_and_bad_signatures_on_private_blobs(
    world: World, tmp_path: Path
) -> None:
    data = world.server.data_dir
    cli(data, "key", "generate", "ciacme")
    token = _token(data, "--scope", "publish", "--namespace", "ciacme")
    dist = make_dist("null", "2.1.2", ["linux_amd64"], b"#!/bin/sh\necho provider\n")
    del dist.files[dist.shasums_name]
    before = world.scrape()
    upload = ["provider", "publish", "ciacme/null", "2.1.2", str(dist.write(tmp_path / "dist"))]
    where = ["--url", world.server.url, "--ca-file", str(world.server.ca_pem)]
    cli(tmp_path / "ci", *upload, "--sign", *where, env={"GITREG_TOKEN": token})
    assert world.get("/v1/providers/ciacme/null/2.1.2/download/linux/amd64")[0] == 200
    after = world.scrape()
    for name in ("gitreg_publishes_total", "gitreg_downloads_total"):
        assert value(after, name, kind="provider") == value(before, name, kind="provider") + 1

    # Once the namespace is private its zip needs a signed URL: a bad one is a
    # failed authentication of its own kind.
    cli(data, "namespace", "set", "ciacme", "--private")
    sha = hashlib.sha256(dist.files[dist.zip_name("linux_amd64")]).hexdigest()
    forged = f"/archives/{sha}.tar.gz?expires=4102444800&signature=forged"
    deadline = time.monotonic() + 30
    while (status := world.get(forged)[0]) == 200 and time.monotonic() < deadline:
        time.sleep(0.1)  # the server sees the CLI's change within refresh_interval
    assert status == 403
    failures = value(world.scrape(), "gitreg_auth_failures_total", kind="signature")
    assert failures > value(before, "gitreg_auth_failures_total", kind="signature")


def test_a_running_job_shows_in_the_running_gauges(world: World) -> None:
    status, text = fetch(world.server.url + "/admin/repos", world.admin, world.server.ssl_context())
    assert status == 200, text
    repos = json.loads(text)["repos"]
    repo_id = next(r["id"] for r in repos if r["forge_repo"] == "acme/terraform-null-hello")
    world.work.commit("more")
    world.work.tag("v1.1.0")
    git(world.work.path, "push", "-q", "origin", "v1.1.0")
    prepared = delivery(
        "github",
        "push-tag-created",
        repo="acme/terraform-null-hello",
        tag="v1.1.0",
        after=world.work.rev("v1.1.0^{commit}"),
        secret=SECRET,
    )
    # The sync takes the repository's lock (gitreg/modules/publisher.py): while
    # this test holds it, the job is claimed and running, and cannot finish.
    with file_lock(world.server.data_dir / "locks" / f"repo-{repo_id}.lock"):
        assert world.post(prepared.route, prepared.body, prepared.headers) == 202
        running = wait_for(
            world.scrape,
            lambda s: (
                value(s, "gitreg_jobs_running") == 1
                and value(s, "gitreg_job_queue", state="running") == 1
            ),
        )
        assert value(running, "gitreg_jobs_running") == 1
        assert value(running, "gitreg_job_queue", state="running") == 1
    done = wait_for(world.scrape, lambda s: value(s, "gitreg_jobs_running") == 0)
    assert value(done, "gitreg_jobs_running") == 0

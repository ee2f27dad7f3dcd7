"""Download counts: counted in memory on the request path,
flushed in batches, kept across restarts, shown as `downloads` in records,
and never showing a private module to others."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.auth.tokens import new_token, token_hash
from gitreg.services import Services
from gitreg.settings import load_settings
from gitreg.usage.store import DownloadRow
from tests.cli.test_yank import _publish_providers, _registry
from tests.support.gitrepo import GitRepo, released_module
from tests.support.server import RunningServer, cli, start_server
from tests.support.terraform import run_terraform

BASE = "https://registry.example.com"


def _record(server: RunningServer, path: str) -> dict[str, object]:
    with urllib.request.urlopen(
        server.url + path, context=server.ssl_context(), timeout=10
    ) as answer:
        found = json.loads(answer.read())
    assert isinstance(found, dict)
    return found


def _init(server: RunningServer, workdir: Path) -> None:
    workdir.mkdir(parents=True)
    (workdir / "main.tf").write_text(
        f'module "hello" {{\n  source  = "{server.host}/acme/hello/null"\n  version = "1.0.0"\n}}\n'
    )
    run_terraform(workdir, "init", ca_pem=server.ca_pem)


def _wait_for(server: RunningServer, path: str, downloads: int) -> None:
    deadline = time.monotonic() + 30  # a few flush intervals on a busy machine
    while _record(server, path)["downloads"] != downloads:
        assert time.monotonic() < deadline, _record(server, path)
        time.sleep(0.5)


@pytest.mark.slow
def test_terraform_init_is_counted_once_each_and_kept_across_restarts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    repo = GitRepo(tmp_path / "hello")
    released_module(repo)
    cli(data, "repo", "add", str(repo.path), "--module", "acme/hello/null")
    server = start_server(data, "--reconcile-interval", "0")
    try:
        _init(server, tmp_path / "one")
        _init(server, tmp_path / "two")
        _wait_for(server, "/v1/modules/acme/hello/null", 2)
        # The browse API's latest /download answers 302; only the download
        # endpoint it points at counts.
        with urllib.request.urlopen(
            server.url + "/v1/modules/acme/hello/null/download",
            context=server.ssl_context(),
            timeout=10,
        ) as answer:
            assert answer.status == 204 and answer.headers["X-Terraform-Get"]
    finally:
        server.stop()  # SIGTERM: the shutdown flushes what was not written yet
    server = start_server(data, "--reconcile-interval", "0")
    try:
        assert _record(server, "/v1/modules/acme/hello/null/1.0.0")["downloads"] == 3
        listed = _record(server, "/v1/modules")["modules"]
        assert isinstance(listed, list) and listed[0]["downloads"] == 3
    finally:
        server.stop()


def _token(svc: Services, namespaces: list[str]) -> tuple[int, dict[str, str]]:
    token = new_token()
    token_id = svc.auth.add_token(token_hash(token), token[:12], "read", namespaces, "", None)
    return token_id, {"authorization": f"Bearer {token}"}


@pytest.fixture
def svc(tmp_path: Path) -> Services:
    from gitreg.services import build_services

    services = build_services(load_settings({"data_dir": tmp_path / "data"}, environ={}))
    for namespace in ("acme", "secret"):
        repo = GitRepo(tmp_path / namespace)
        released_module(repo)
        registered = services.index.add_repo(str(repo.path), "")
        services.index.add_module(registered.id, namespace, "hello", "null", "", "")
        services.publisher.sync_repo(registered)
    services.auth.set_namespace_private("secret", True)
    return services


def test_counts_per_token_and_private_counts_stay_private(svc: Services) -> None:
    reader_id, reader = _token(svc, ["secret"])
    _, other = _token(svc, ["acme"])
    with TestClient(create_app(svc.settings, svc), base_url=BASE) as client:
        for path, headers in [
            ("/v1/modules/acme/hello/null/1.0.0/download", {}),
            ("/v1/modules/acme/hello/null/v1.0.0/download", reader),  # same version
            ("/v1/modules/secret/hello/null/1.0.0/download", reader),
            ("/v1/modules/secret/hello/null/1.0.0/download", reader),
        ]:
            assert client.get(path, headers=headers).status_code == 204
        assert client.get("/v1/modules/secret/hello/null/1.0.0/download").status_code == 401
    # The app's shutdown flushed the counts; a new app reads them back.
    counts = svc.downloads.store
    acme = svc.index.find_module("acme", "hello", "null")
    secret = svc.index.find_module("secret", "hello", "null")
    assert acme is not None and secret is not None
    today = time.strftime("%Y-%m-%d", time.gmtime())
    by_token = [
        (r.version, r.token_id, r.downloads) for r in counts.usage_rows("module", acme.id, today)
    ]
    assert by_token == [("1.0.0", 0, 1), ("1.0.0", reader_id, 1)]
    by_token = [
        (r.version, r.token_id, r.downloads) for r in counts.usage_rows("module", secret.id, today)
    ]
    assert by_token == [("1.0.0", reader_id, 2)]
    with TestClient(create_app(svc.settings, svc), base_url=BASE) as client:
        for headers in ({}, other):
            listed = client.get("/v1/modules", headers=headers).json()["modules"]
            assert [(m["namespace"], m["downloads"]) for m in listed] == [("acme", 2)]
            page = client.get("/v1/modules/secret/hello/null", headers=headers)
            assert page.status_code in (401, 404) and "downloads" not in page.text
        mine = client.get("/v1/modules/secret/hello/null", headers=reader).json()
        assert mine["downloads"] == 2


def test_case_and_build_metadata_variants_are_one_pending_key(svc: Services) -> None:
    """Each variant is the same download; as keys of their own, an anonymous
    client could fill the counter with keys between flushes."""
    taken: list[dict[tuple[str, str, str, str, str, int], int]] = []
    with TestClient(create_app(svc.settings, svc), base_url=BASE) as client:
        taken.append(svc.downloads.take())  # anything counted before this test's requests
        for path in (
            "/v1/modules/acme/hello/null/1.0.0/download",
            "/v1/modules/ACME/Hello/NULL/1.0.0/download",
            "/v1/modules/acme/hello/null/1.0.0+" + "x" * 100 + "/download",
            "/v1/modules/aCmE/hello/null/1.0.0+build.7/download",
        ):
            assert client.get(path).status_code == 204
        taken.append(svc.downloads.take())
    assert taken[1] == {("module", "acme", "hello", "null", "1.0.0", 0): 4}


def test_counts_wait_in_memory_while_the_database_is_away(
    svc: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = svc.downloads
    key = ("module", "acme", "hello", "null", "1.0.0", 0)
    failing: list[list[DownloadRow]] = []

    def refuse(rows: list[DownloadRow]) -> None:
        failing.append(rows)
        raise OSError("database is away")

    async def flush_twice() -> None:
        task = asyncio.create_task(counter.run(0.05))
        counter.add(key)
        while not failing:
            await asyncio.sleep(0.01)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    with monkeypatch.context() as patched:
        patched.setattr(counter.store, "add_downloads", refuse)
        asyncio.run(flush_twice())
    counter.add(key)
    counter.flush()  # the database is back: nothing was lost
    module = svc.index.find_module("acme", "hello", "null")
    assert module is not None and counter.total("module", module.id) == 2


def test_provider_downloads_are_counted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = tmp_path / "data"
    _publish_providers(capsys, tmp_path, ["--data-dir", str(data)], ["1.0.0"])
    with _registry(data) as client:
        for _ in range(2):
            answer = client.get("/v1/providers/acme/null/1.0.0/download/linux/amd64")
            assert answer.status_code == 200
        assert client.get("/v1/providers/acme/null/1.0.0/download/linux/arm64").status_code == 404
    with _registry(data) as client:  # the first app's shutdown flushed its counts
        assert client.get("/v1/providers/acme/null").json()["downloads"] == 2

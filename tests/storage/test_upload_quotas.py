"""Quotas and expiry for staged CI uploads.

Without them one namespace-scoped publish token could stage gigabytes in
seconds and keep them for hours. A real `gitreg serve` with small limits in
its config file: bytes over `max_staged_bytes_per_token` or
`max_staged_bytes` are refused (413, naming the limit) whether the client
declares them or streams them, and a cleaner removes idle uploads and
leftover blob temp files while the server runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.auth.tokens import new_token, token_hash
from gitreg.services import Services, build_services
from gitreg.settings import load_settings
from gitreg.storage.s3_uploads import S3IncomingFile
from gitreg.storage.sealing import generate_key_file
from gitreg.storage.staging import LocalIncomingFile
from tests.support.server import RunningServer, cli

UPLOADS = "/api/v1/providers/acme/null/1.0.0/uploads"
KIB = 1024
PLATFORMS = ("linux_amd64", "darwin_arm64", "windows_amd64")

Servers = Callable[..., RunningServer]


def _server(servers: Servers, data_dir: Path, config: str) -> RunningServer:
    data_dir.mkdir(parents=True)
    (data_dir / "gitreg.toml").write_text(config)
    return servers(data_dir, "--reconcile-interval", "0")


def _client(server: RunningServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, verify=server.ssl_context(), timeout=30)


def _token(data_dir: Path) -> dict[str, str]:
    created = cli(data_dir, "token", "create", "--scope", "publish", "--namespace", "acme")
    return {"Authorization": f"Bearer {created.stdout.split()[-1]}"}


def _new_upload(client: httpx.Client, headers: dict[str, str]) -> str:
    answer = client.post(UPLOADS, headers=headers)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["upload_id"])


def _put(
    client: httpx.Client,
    headers: dict[str, str],
    upload_id: str,
    platform: str,
    size: int,
    declare: bool = True,
) -> httpx.Response:
    """PUT one zip of `size` bytes; without `declare`, streamed with no Content-Length."""
    url = f"{UPLOADS}/{upload_id}/terraform-provider-null_1.0.0_{platform}.zip"
    if declare:
        return client.put(url, headers=headers, content=b"z" * size)

    def chunks() -> Iterator[bytes]:
        for _ in range(size // (8 * KIB)):
            yield b"z" * (8 * KIB)

    return client.put(url, headers=headers, content=chunks())


def _staged_files(data_dir: Path) -> list[str]:
    return sorted(p.name for p in (data_dir / "uploads").rglob("*") if p.is_file())


def test_staged_bytes_per_token_are_capped(servers: Servers, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = _server(
        servers,
        data_dir,
        f"max_staged_bytes_per_token = {100 * KIB}\nmax_staged_bytes = {KIB**2}\n",
    )
    greedy, other = _token(data_dir), _token(data_dir)
    with _client(server) as client:
        upload = _new_upload(client, greedy)
        assert _put(client, greedy, upload, "linux_amd64", 64 * KIB).status_code == 201
        declared = _put(client, greedy, upload, "darwin_amd64", 64 * KIB)
        assert declared.status_code == 413
        assert "max_staged_bytes_per_token" in declared.json()["errors"][0]
        # A second upload of the same token shares the quota; a client that
        # does not declare its size is cut off while streaming.
        second = _new_upload(client, greedy)
        streamed = _put(client, greedy, second, "linux_arm64", 256 * KIB, declare=False)
        assert streamed.status_code == 413
        assert "max_staged_bytes_per_token" in streamed.json()["errors"][0]
        # Another token has its own quota.
        theirs = _new_upload(client, other)
        assert _put(client, other, theirs, "linux_amd64", 64 * KIB).status_code == 201
    assert _staged_files(data_dir).count("terraform-provider-null_1.0.0_linux_amd64.zip") == 2
    assert not [name for name in _staged_files(data_dir) if name.endswith(".partial")]


def test_staged_bytes_in_total_are_capped(servers: Servers, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = _server(
        servers,
        data_dir,
        f"max_staged_bytes_per_token = {100 * KIB}\nmax_staged_bytes = {150 * KIB}\n",
    )
    first, second, third = _token(data_dir), _token(data_dir), _token(data_dir)
    with _client(server) as client:
        for headers in (first, second):
            upload = _new_upload(client, headers)
            assert _put(client, headers, upload, "linux_amd64", 64 * KIB).status_code == 201
        upload = _new_upload(client, third)
        for declare in (True, False):
            refused = _put(client, third, upload, "linux_amd64", 64 * KIB, declare=declare)
            assert refused.status_code == 413
            assert "max_staged_bytes " in refused.json()["errors"][0]
    assert not [name for name in _staged_files(data_dir) if name.endswith(".partial")]


def _age(path: Path, seconds: float) -> None:
    old = time.time() - seconds
    for each in [path, *path.rglob("*")]:
        os.utime(each, (old, old))


@pytest.mark.slow
def test_idle_uploads_and_temp_files_are_removed_while_the_server_runs(
    servers: Servers, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    server = _server(servers, data_dir, "staging_ttl = 2\n")
    token = _token(data_dir)
    temp_dir = data_dir / "blobs" / "tmp"
    leftover = temp_dir / "blob-left-by-a-crash"
    leftover.write_bytes(b"x" * KIB)
    live = temp_dir / "blob-being-written"
    with _client(server) as client, live.open("wb") as writer:
        fcntl.flock(writer.fileno(), fcntl.LOCK_EX)  # as FileBlobStore's writer holds it
        upload = _new_upload(client, token)
        assert _put(client, token, upload, "linux_amd64", 8 * KIB).status_code == 201
        for path in (data_dir / "uploads" / upload, leftover, live):
            _age(path, 60)
        deadline = time.monotonic() + 20
        while (data_dir / "uploads" / upload).exists() or leftover.exists():
            assert time.monotonic() < deadline, "the cleaner did not run"
            time.sleep(0.1)
        assert live.exists(), "a temp file a writer holds locked was removed"
        gone = _put(client, token, upload, "darwin_amd64", 8 * KIB)
        assert gone.status_code == 404


def _replicas(
    request: pytest.FixtureRequest, tmp_path: Path, count: int
) -> Iterator[list[Services]]:
    """`count` replicas' services: separate data dirs sharing one PostgreSQL
    database and one bucket, or one data dir (SQLite, local uploads) shared as
    `serve --workers N` shares it."""
    config: dict[str, object] = {"max_staged_bytes_per_token": 10 * KIB, "job_workers": 0}
    environ = {"GITREG_S3_ADDRESSING": "path"}
    if request.param == "postgresql+s3":
        config["database_url"] = request.getfixturevalue("postgres_database").url
        config["blob_store"] = request.getfixturevalue("s3").url
        config["secret_key_file"] = tmp_path / "secret.key"
        generate_key_file(tmp_path / "secret.key")
        dirs = [tmp_path / f"replica-{n}" for n in range(count)]
    else:
        dirs = [tmp_path / "data"] * count
    built = [
        build_services(load_settings({**config, "data_dir": d}, environ=environ)) for d in dirs
    ]
    yield built
    for svc in built:
        svc.close()


@pytest.fixture(params=["sqlite+local", "postgresql+s3"])
def three_replicas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[Services]]:
    yield from _replicas(request, tmp_path, 3)


def test_concurrent_uploads_to_three_replicas_stay_within_the_token_quota(
    three_replicas: list[Services], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One token's three 6 KiB files PUT at once to three replicas against its
    10 KiB quota: one is stored, two are refused. Each file that passes the
    quota waits at its commit until every PUT got that far or was answered, so
    all three are in flight together."""
    token = new_token()
    three_replicas[0].auth.add_token(token_hash(token), token[:12], "publish", ["acme"], "", None)
    headers = {"Authorization": f"Bearer {token}"}
    release = threading.Event()
    waiting: list[object] = []
    answers: list[Any] = []  # the test client's responses

    def held(original: Callable[[Any], None]) -> Callable[[Any], None]:
        def commit(self: Any) -> None:
            waiting.append(self)
            assert release.wait(60), "the other PUTs never arrived"
            original(self)

        return commit

    monkeypatch.setattr(LocalIncomingFile, "commit", held(LocalIncomingFile.commit))
    monkeypatch.setattr(S3IncomingFile, "commit", held(S3IncomingFile.commit))
    with contextlib.ExitStack() as stack:
        clients = [
            stack.enter_context(TestClient(create_app(svc.settings, svc), "https://testserver"))
            for svc in three_replicas
        ]
        url = clients[0].post(UPLOADS, headers=headers).json()["url"]

        def put(client: TestClient, platform: str) -> None:
            name = f"terraform-provider-null_1.0.0_{platform}.zip"
            answers.append(client.put(f"{url}/{name}", headers=headers, content=b"z" * 6 * KIB))

        threads = [
            threading.Thread(target=put, args=(client, platform))
            for client, platform in zip(clients, PLATFORMS, strict=True)
        ]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 60
        while len(waiting) + len(answers) < 3:
            assert time.monotonic() < deadline, "the PUTs never got as far as their commit"
            time.sleep(0.01)
        release.set()
        for thread in threads:
            thread.join()
    assert sorted(a.status_code for a in answers) == [201, 413, 413]
    refused = [a.json()["errors"][0] for a in answers if a.status_code == 413]
    assert all("max_staged_bytes_per_token (10240)" in error for error in refused)

"""End to end: a registry whose blobs live in S3, through real
`gitreg serve` processes, the real CLI and real Terraform.

moto's S3 server runs in this process on 127.0.0.1 (tests/support/s3.py); the
CLI publishes into it and `gitreg serve` reads from it, both configured only by
GITREG_BLOB_STORE and the standard AWS_* variables. Archives are streamed with
their true length, or, with `blob_downloads = redirect`, answered by a 302 to a
presigned URL; the URL Terraform is given stays gitreg's either way. An S3
outage is a 503 with Retry-After for archive downloads, never a 500, and ends
by itself.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import IO

import pytest

from gitreg.settings import load_settings
from gitreg.storage.select import open_blob_store
from tests.support.gitrepo import GitRepo
from tests.support.s3 import CuttableProxy, MotoS3, S3Bucket, moto_s3
from tests.support.server import RunningServer, cli, start_server
from tests.support.terraform import run_terraform

MODULE = "acme/net/aws"


@dataclass
class Registry:
    moto: MotoS3
    bucket: S3Bucket
    stream: RunningServer
    redirect: RunningServer


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    root = tmp_path_factory.mktemp("e2e-s3")
    moto = moto_s3()
    bucket = S3Bucket(moto, "gitreg-e2e", "registry")
    moto.create_bucket(bucket.bucket)
    repo = GitRepo(root / "terraform-aws-net")
    repo.write("main.tf", 'output "release" {\n  value = "1.0.0"\n}\n')
    repo.commit("release 1.0.0")
    repo.tag("v1.0.0")
    data = root / "data"
    added = cli(data, "repo", "add", str(repo.path), "--module", MODULE, env=bucket.env())
    assert f"published {MODULE} 1.0.0" in added.stdout
    assert not (data / "blobs").exists()  # the archive went to S3, not the data dir
    # Two replicas sharing the index and the bucket: one streams, one redirects.
    stream = start_server(data, "--reconcile-interval", "0", env=bucket.env())
    redirect = start_server(
        data,
        "--reconcile-interval",
        "0",
        env={**bucket.env(), "GITREG_BLOB_DOWNLOADS": "redirect"},
    )
    yield Registry(moto, bucket, stream, redirect)
    stream.stop()
    redirect.stop()
    moto.stop()


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _request(
    server: RunningServer, url: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, Message, bytes]:
    opener = urllib.request.build_opener(
        _NoRedirects, urllib.request.HTTPSHandler(context=server.ssl_context())
    )
    if url.startswith("/"):
        url = server.url + url
    try:
        with opener.open(
            urllib.request.Request(url, method=method, headers=headers or {}), timeout=30
        ) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as exc:
        body: IO[bytes] = exc
        return exc.code, exc.headers, body.read()


def _archive_url(server: RunningServer) -> str:
    status, headers, _ = _request(server, f"/v1/modules/{MODULE}/1.0.0/download")
    assert status == 204
    return str(headers["X-Terraform-Get"])


def test_archives_stream_from_s3_with_their_true_length(registry: Registry) -> None:
    url = _archive_url(registry.stream)
    assert url.startswith(registry.stream.url + "/archives/")  # a gitreg URL, not S3's
    sha256 = url.rsplit("/", 1)[-1].split(".")[0]
    status, head, body = _request(registry.stream, url, "HEAD")
    assert status == 200 and body == b""
    status, got, archive = _request(registry.stream, url)
    assert status == 200
    assert hashlib.sha256(archive).hexdigest() == sha256
    assert int(head["Content-Length"]) == int(got["Content-Length"]) == len(archive) > 0
    assert got["ETag"] == f'"{sha256}"'
    status, _, _ = _request(registry.stream, url, headers={"If-None-Match": f'"{sha256}"'})
    assert status == 304


def test_redirect_mode_answers_a_302_to_a_presigned_url_of_the_same_bytes(
    registry: Registry,
) -> None:
    streamed = _archive_url(registry.stream)
    url = _archive_url(registry.redirect)
    # The URL clients see and cache hashes by is the same gitreg path either way.
    assert url.removeprefix(registry.redirect.url) == streamed.removeprefix(registry.stream.url)
    status, headers, _ = _request(registry.redirect, url)
    assert status == 302
    assert headers["Cache-Control"] == "private, no-store"
    location = str(headers["Location"])
    assert location.startswith(registry.moto.endpoint) and "X-Amz-Signature=" in location
    with urllib.request.urlopen(location, timeout=30) as answer:
        presigned = answer.read()
    _, _, streamed_bytes = _request(registry.stream, streamed)
    assert presigned == streamed_bytes
    # HEAD is answered by gitreg itself, with the true length: the presigned URL
    # is signed for GET only.
    status, head, _ = _request(registry.redirect, url, "HEAD")
    assert status == 200 and int(head["Content-Length"]) == len(presigned)


def test_terraform_init_installs_a_module_whose_archive_is_in_s3(
    registry: Registry, tmp_path: Path
) -> None:
    for server in (registry.stream, registry.redirect):
        workdir = tmp_path / str(server.port)
        workdir.mkdir()
        (workdir / "main.tf").write_text(
            f'module "net" {{\n  source  = "{server.host}/{MODULE}"\n  version = "1.0.0"\n}}\n'
        )
        run_terraform(workdir, "init", ca_pem=server.ca_pem)
        manifest = json.loads((workdir / ".terraform/modules/modules.json").read_text())
        installed = next(m for m in manifest["Modules"] if m["Key"] == "net")
        assert '"1.0.0"' in (workdir / installed["Dir"] / "main.tf").read_text()


def test_an_s3_outage_is_a_503_with_retry_after_and_ends_by_itself(registry: Registry) -> None:
    url = _archive_url(registry.stream)
    registry.moto.stop()
    try:
        for server in (registry.stream, registry.redirect):
            status, headers, body = _request(server, url.replace(registry.stream.url, server.url))
            assert status == 503, body
            assert int(headers["Retry-After"]) > 0
            assert json.loads(body)["errors"]
        status, headers, _ = _request(registry.stream, url, "HEAD")
        assert status == 503 and int(headers["Retry-After"]) > 0
        # Metadata does not need S3 and keeps serving.
        status, _, _ = _request(registry.stream, f"/v1/modules/{MODULE}/versions")
        assert status == 200
        status, _, body = _request(registry.stream, "/readyz")
        assert status == 503 and b"blob store not writable" in body
    finally:
        registry.moto.start()
    status, _, archive = _request(registry.stream, url)
    assert status == 200 and hashlib.sha256(archive).hexdigest() in url
    assert "Traceback" not in registry.stream.log()


def test_s3_failing_mid_body_aborts_the_download_short_of_its_length(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 24 MiB blob (any blob no private namespace owns is public), served by a
    # replica whose S3 connections go through a proxy that cuts them 2 MiB into
    # the body, and refuses the client's retries.
    proxy = CuttableProxy(registry.moto.port)
    env = {**registry.bucket.env(), "AWS_ENDPOINT_URL": proxy.endpoint}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    data = hashlib.sha256(b"big").digest() * (24 * 1024 * 1024 // 32)
    settings = load_settings(
        {"data_dir": tmp_path / "writer", "blob_store": registry.bucket.url},
        environ={"GITREG_S3_ADDRESSING": "path"},
    )
    blobs = open_blob_store(settings)
    sha256 = blobs.put_bytes(data).sha256
    server = start_server(registry.stream.data_dir, "--reconcile-interval", "0", env=env)
    try:
        request = urllib.request.Request(f"{server.url}/archives/{sha256}.tar.gz")
        proxy.cut_after(2 * 1024 * 1024)
        with urllib.request.urlopen(request, context=server.ssl_context(), timeout=30) as answer:
            assert int(answer.headers["Content-Length"]) == len(data)
            # A whole read, as a client checking the length does (Terraform's
            # getter reports "unexpected EOF"): the body stops short of it.
            with pytest.raises((http.client.IncompleteRead, OSError)) as short:
                answer.read()
        if isinstance(short.value, http.client.IncompleteRead):
            assert len(short.value.partial) < len(data)
        status, _, _ = _request(server, "/healthz")
        assert status == 200  # the server lives on
        # One error line with the store's traceback, not a second one from the
        # app's handler and a third from uvicorn (ResponseCut, gitreg/api/blobs.py).
        log = server.log().splitlines()
        lines = [json.loads(line) for line in log if line.startswith("{")]
        errors = [line for line in lines if line["level"] in ("error", "critical")]
        assert len(errors) == 1, errors
        assert errors[0]["msg"].startswith(f"cut off blob {sha256} after ")
    finally:
        server.stop()
        proxy.cut()


def test_worker_processes_get_a_blob_store_given_as_a_flag(registry: Registry) -> None:
    # Only the parent parses --blob-store; `serve --workers 2` hands it on to the
    # workers through the environment (gitreg.server.cli._export_settings).
    env = {**registry.moto.env(), "GITREG_S3_ADDRESSING": "path"}
    server = start_server(
        registry.stream.data_dir,
        "--workers",
        "2",
        "--reconcile-interval",
        "0",
        env=env,
        before=("--blob-store", registry.bucket.url),
    )
    try:
        url = _archive_url(server)
        for _ in range(4):  # the connections land on either worker
            status, _, archive = _request(server, url)
            assert status == 200 and hashlib.sha256(archive).hexdigest() in url
    finally:
        server.stop()

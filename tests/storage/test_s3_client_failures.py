"""The S3 client's failures never reach a user as a traceback.

An endpoint at an IP address or `localhost` is addressed path-style without
being told: virtual-hosted requests to `BUCKET.127.0.0.1` made the client
panic. Whatever else the client raises, a panic included (pyo3's
`PanicException`, a BaseException), is a 503 with a JSON body for HTTP and one
`gitreg: error:` line and a non-zero exit for the CLI.

Against moto's S3 server on 127.0.0.1 (tests/support/s3.py), through obstore.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import obstore
import pytest
from obstore.store import S3Store
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.cli import main
from gitreg.settings import load_settings
from gitreg.storage.s3 import s3_options
from tests.support.gitrepo import GitRepo, released_module
from tests.support.s3 import S3Bucket, client_panic
from tests.support.server import cli

MODULE = "acme/net/aws"


def _objects(bucket: S3Bucket, prefix: str) -> list[str]:
    raw = S3Store(
        bucket.bucket,
        config={
            "endpoint": bucket.moto.endpoint,
            "access_key_id": "testing",
            "secret_access_key": "testing",
            "region": "us-east-1",
        },
        client_options={"allow_http": True},
    )
    return [meta["path"] for batch in obstore.list(raw, prefix) for meta in batch]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_repo_add_to_an_endpoint_at_an_ip_or_localhost_needs_no_addressing_setting(
    s3: S3Bucket, tmp_path: Path, host: str
) -> None:
    repo = released_module(GitRepo(tmp_path / "repo"))
    env = {
        "AWS_ENDPOINT_URL": f"http://{host}:{s3.moto.port}",
        "GITREG_BLOB_STORE": s3.url,  # s3_addressing left at its default, virtual
    }
    added = cli(tmp_path / "data", "repo", "add", str(repo.path), "--module", MODULE, env=env)
    assert f"published {MODULE} 1.0.0" in added.stdout
    assert "Traceback" not in added.stderr and "panic" not in added.stderr
    assert _objects(s3, f"{s3.prefix}/blobs/")  # the archive is in the bucket


@pytest.mark.parametrize(
    "variables",
    [
        {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"},
        {"AWS_ENDPOINT_URL": "http://[::1]:9000/"},
        {"AWS_ENDPOINT_URL": "https://localhost:9000"},
        {"AWS_ENDPOINT": "http://10.0.0.7:9000"},  # the client's own name for it
    ],
)
def test_an_endpoint_without_subdomains_is_addressed_path_style(
    variables: dict[str, str],
) -> None:
    config, _, _ = s3_options("bucket", "virtual", variables)
    assert config["virtual_hosted_style_request"] is False
    assert config["endpoint"] == next(iter(variables.values())).rstrip("/")


def _panicking(*names: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call of these client functions panics, as the Rust client does."""

    def panic(*args: object, **kwargs: object) -> None:
        raise client_panic("called `Result::unwrap()` on an `Err` value: InvalidIpv4Address")

    for name in names:
        monkeypatch.setattr(obstore, name, panic)


@pytest.fixture
def published(
    s3: S3Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[list[str]], int]:
    """A data dir whose blobs are in `s3`, with MODULE published; calls the
    in-process CLI on it."""
    data_dir = tmp_path / "data"
    monkeypatch.setenv("GITREG_BLOB_STORE", s3.url)
    monkeypatch.setenv("GITREG_S3_ADDRESSING", "path")  # the panics here are forced

    def run(args: list[str]) -> int:
        return main([*args, "--data-dir", str(data_dir)])

    repo = released_module(GitRepo(tmp_path / "repo"))
    assert run(["repo", "add", str(repo.path), "--module", MODULE]) == 0
    return run


def test_a_client_panic_is_a_503_for_http(
    published: Callable[[list[str]], int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings({"data_dir": tmp_path / "data"})
    with TestClient(create_app(settings), base_url="https://testserver") as client:
        answer = client.get(f"/v1/modules/{MODULE}/1.0.0/download")
        archive = answer.headers["x-terraform-get"]
        _panicking("get", "head", "sign", monkeypatch=monkeypatch)
        answer = client.get(archive)
    assert answer.status_code == 503
    [error] = answer.json()["errors"]
    assert error.startswith("blob store unavailable")
    assert int(answer.headers["retry-after"]) > 0


def test_a_client_panic_is_one_error_line_for_the_cli(
    published: Callable[[list[str]], int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    other = released_module(GitRepo(tmp_path / "other"))
    capsys.readouterr()
    _panicking("put", "head", monkeypatch=monkeypatch)
    assert published(["repo", "add", str(other.path), "--module", "acme/other/aws"]) == 1
    stderr = capsys.readouterr().err
    [error] = [line for line in stderr.splitlines() if line.startswith("gitreg: error:")]
    assert error.startswith("gitreg: error: blob store unavailable"), stderr
    assert "Traceback" not in stderr and "PanicException" not in stderr

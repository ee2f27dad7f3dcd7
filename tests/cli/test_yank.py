"""`gitreg module|provider yank|unyank`: a yanked version leaves the
version lists but keeps downloading by exact version, on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.cli import main
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.postgres import Database
from tests.support.provider_dist import make_dist, public_armor, publisher_key
from tests.support.server import RunningServer, cli

BINARY = b"\x7fELF fake provider" * 200
BASE = "https://registry.example.com"
MIRROR = "/mirror/registry.example.com/acme/null"
# Another process notices a yank by polling (every 0.25 s) or through
# PostgreSQL's change feed; the tests wait for the answer to change, up to this.
NOTICE_DEADLINE = 30.0


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _publish_providers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: list[str], versions: list[str]
) -> None:
    key = tmp_path / "publisher.asc"
    key.write_bytes(public_armor(publisher_key()))
    assert _run(capsys, "key", "add", "acme", str(key), *flags)[0] == 0
    for version in versions:
        dist = make_dist("null", version, ["linux_amd64"], BINARY, publisher_key())
        directory = dist.write(tmp_path / f"dist-{version}")
        code, _, err = _run(
            capsys, "provider", "publish", "acme/null", version, str(directory), *flags
        )
        assert code == 0, err


@pytest.fixture
def provider_data(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    data = tmp_path / "data"
    _publish_providers(capsys, tmp_path, ["--data-dir", str(data)], ["1.0.0", "1.1.0"])
    return data


@contextmanager
def _registry(data: Path, **settings: object) -> Iterator[TestClient]:
    """gitreg's app on the data dir, with services of its own (as `serve` has)."""
    loaded = load_settings({"data_dir": data, "public_url": BASE, **settings}, environ={})
    with TestClient(create_app(loaded), base_url=BASE) as client:
        yield client


def _provider_versions(client: TestClient) -> list[str]:
    answer = client.get("/v1/providers/acme/null/versions")
    assert answer.status_code == 200, answer.text
    return [v["version"] for v in answer.json()["versions"]]


def _assert_downloads(client: TestClient, version: str) -> None:
    """What a lock file pinned to `version` fetches still answers, bytes included."""
    answer = client.get(f"/v1/providers/acme/null/{version}/download/linux/amd64")
    assert answer.status_code == 200, answer.text
    found = answer.json()
    archive = client.get(found["download_url"])
    assert archive.status_code == 200
    assert hashlib.sha256(archive.content).hexdigest() == found["shasum"]
    mirrored = client.get(f"{MIRROR}/{version}.json")
    assert mirrored.status_code == 200, mirrored.text
    assert list(mirrored.json()["archives"]) == ["linux_amd64"]


def _yanked_flags(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, bool]:
    code, out, _ = _run(capsys, "providers", "--json", *flags)
    assert code == 0
    return {v["version"]: v["yanked"] for v in json.loads(out)[0]["versions"]}


def test_provider_yank_hides_the_version_and_keeps_its_downloads(
    capsys: pytest.CaptureFixture[str], provider_data: Path
) -> None:
    flags = ("--data-dir", str(provider_data))
    code, out, _ = _run(capsys, "provider", "yank", "acme/null", "1.1.0", *flags)
    assert code == 0 and out.startswith("yanked provider acme/null 1.1.0")
    assert _yanked_flags(capsys, *flags) == {"1.0.0": False, "1.1.0": True}
    assert "1.1.0 (yanked)" in _run(capsys, "providers", *flags)[1]
    with _registry(provider_data) as client:
        assert _provider_versions(client) == ["1.0.0"]
        assert client.get(f"{MIRROR}/index.json").json() == {"versions": {"1.0.0": {}}}
        _assert_downloads(client, "1.1.0")
    code, out, _ = _run(capsys, "provider", "yank", "acme/null", "1.1.0", *flags)
    assert code == 0 and "already yanked; nothing changed" in out
    code, out, _ = _run(capsys, "provider", "unyank", "ACME/Null", "1.1.0", *flags)
    assert code == 0 and out.startswith("unyanked provider acme/null 1.1.0: listed again")
    with _registry(provider_data) as client:
        assert _provider_versions(client) == ["1.0.0", "1.1.0"]
        index = client.get(f"{MIRROR}/index.json").json()
        assert index == {"versions": {"1.0.0": {}, "1.1.0": {}}}


@pytest.mark.parametrize(
    ("args", "exit_code", "message"),
    [
        (["provider", "yank", "acme/none", "1.0.0"], 1, "provider acme/none is not registered"),
        (["provider", "yank", "acme/null", "9.9.9"], 1, "has no version 9.9.9"),
        (["provider", "unyank", "acme/null", "2.0.0"], 1, "has no version 2.0.0"),
        (["provider", "yank", "acme", "1.0.0"], 2, "NAMESPACE/TYPE"),
        (["provider", "yank", "acme/null", "v1.0.0"], 2, "not a provider version"),
        (["module", "yank", "acme/vpc/aws", "1.0.0"], 1, "module acme/vpc/aws is not registered"),
        (["module", "yank", "acme/vpc", "1.0.0"], 2, "NAMESPACE/NAME/SYSTEM"),
        (["module", "unyank", "acme/vpc/aws", "one"], 2, "not a semantic version"),
    ],
)
def test_unknown_names_exit_1_and_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str],
    provider_data: Path,
    args: list[str],
    exit_code: int,
    message: str,
) -> None:
    code, out, err = _run(capsys, *args, "--data-dir", str(provider_data))
    assert (code, out) == (exit_code, "")
    assert err.startswith("gitreg: error: ") and message in err


def _get(server: RunningServer, path: str) -> tuple[int, Any, dict[str, str]]:
    request = urllib.request.Request(server.url + path)
    with urllib.request.urlopen(request, context=server.ssl_context(), timeout=10) as answer:
        body = answer.read()
        headers = {k.lower(): v for k, v in answer.headers.items()}
        return answer.status, json.loads(body) if body else None, headers


def _wait_for(read: Callable[[], object], expected: object) -> None:
    """Until a serving process shows the change a CLI made in another process."""
    deadline = time.monotonic() + NOTICE_DEADLINE
    while (seen := read()) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen == expected


def test_module_yank_reaches_a_running_server(
    data_dir: Path,
    make_repo: Callable[[str], GitRepo],
    servers: Callable[..., RunningServer],
) -> None:
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    repo.tag("v1.1.0")
    cli(data_dir, "repo", "add", str(repo.path), "--module", "acme/vpc/aws")
    server = servers(data_dir)
    path = "/v1/modules/acme/vpc/aws/versions"

    def listed() -> list[str]:
        return [v["version"] for v in _get(server, path)[1]["modules"][0]["versions"]]

    assert sorted(listed()) == ["1.0.0", "1.1.0"]  # now cached by the server
    out = cli(data_dir, "module", "yank", "acme/vpc/aws", "v1.1.0").stdout
    assert out.startswith("yanked module acme/vpc/aws 1.1.0: hidden from version lists")
    _wait_for(listed, ["1.0.0"])
    status, _, headers = _get(server, "/v1/modules/acme/vpc/aws/1.1.0/download")
    assert status == 204 and headers["x-terraform-get"].endswith(".tar.gz")
    shown = json.loads(cli(data_dir, "modules", "--json").stdout)
    assert {v["version"]: v["yanked"] for v in shown[0]["versions"]} == {
        "1.0.0": False,
        "1.1.0": True,
    }
    assert "1.1.0 (yanked)" in cli(data_dir, "modules").stdout
    cli(data_dir, "module", "unyank", "acme/vpc/aws", "1.1.0")
    _wait_for(lambda: sorted(listed()), ["1.0.0", "1.1.0"])


def test_provider_yank_on_postgresql_reaches_another_replica(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, postgres_database: Database
) -> None:
    key = tmp_path / "secret.key"
    key.write_text(os.urandom(32).hex())
    key.chmod(0o600)
    data = tmp_path / "data"
    flags = ["--data-dir", str(data), "--database-url", postgres_database.url]
    flags += ["--secret-key-file", str(key)]
    _publish_providers(capsys, tmp_path, flags, ["1.0.0", "1.1.0"])
    replica = {"database_url": postgres_database.url, "secret_key_file": key}
    with _registry(data, **replica) as client:
        assert _provider_versions(client) == ["1.0.0", "1.1.0"]  # cached by the replica
        assert _run(capsys, "provider", "yank", "acme/null", "1.1.0", *flags)[0] == 0
        _wait_for(lambda: _provider_versions(client), ["1.0.0"])
        _assert_downloads(client, "1.1.0")
        assert _yanked_flags(capsys, *flags) == {"1.0.0": False, "1.1.0": True}
        assert _run(capsys, "provider", "unyank", "acme/null", "1.1.0", *flags)[0] == 0
        _wait_for(lambda: _provider_versions(client), ["1.0.0", "1.1.0"])

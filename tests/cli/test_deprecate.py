"""`gitreg module deprecate|undeprecate`: a deprecated version stays
listed and installable; its version-list entry, its browse record and its
module page carry the reason and link."""

from __future__ import annotations

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
from tests.support.server import RunningServer, cli

BASE = "https://registry.example.com"
VERSIONS = "/v1/modules/acme/vpc/aws/versions"
REASON = "1.0.x loses the NAT gateway on apply; use 1.1.0"
LINK = "https://docs.example.com/vpc/1.1?from=1.0&x=y"
NOTICE_DEADLINE = 30.0  # another process notices by polling or the change feed


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def module_data(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> Path:
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    repo.tag("v1.1.0")
    data = tmp_path / "data"
    args = ("repo", "add", str(repo.path), "--module", "acme/vpc/aws", "--data-dir", str(data))
    assert _run(capsys, *args)[0] == 0
    return data


@contextmanager
def _registry(data: Path, **settings: object) -> Iterator[TestClient]:
    loaded = load_settings({"data_dir": data, "public_url": BASE, **settings}, environ={})
    with TestClient(create_app(loaded), base_url=BASE) as client:
        yield client


def _entries(client: TestClient) -> list[dict[str, Any]]:
    answer = client.get(VERSIONS)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["modules"][0]["versions"])


def test_deprecate_keeps_the_version_listed_and_installable(
    capsys: pytest.CaptureFixture[str], module_data: Path
) -> None:
    flags = ("--data-dir", str(module_data))
    args = ("module", "deprecate", "acme/vpc/aws", "v1.0.0", "--reason", REASON)
    code, out, err = _run(capsys, *args, "--link", LINK, *flags)
    assert (code, err) == (0, "")
    assert out.startswith("deprecated module acme/vpc/aws 1.0.0: still listed and installable")
    with _registry(module_data) as client:
        notice = {"reason": REASON, "link": LINK}
        assert _entries(client) == [
            {"version": "1.0.0", "deprecation": notice},
            {"version": "1.1.0"},
        ]
        download = client.get("/v1/modules/acme/vpc/aws/1.0.0/download")
        assert download.status_code == 204 and download.headers["x-terraform-get"]
        record = client.get("/v1/modules/acme/vpc/aws/1.0.0").json()
        assert record["deprecation"] == notice
        assert record["deprecated_versions"] == ["1.0.0"]
        assert client.get("/v1/modules/acme/vpc/aws/1.1.0").json()["deprecation"] is None
    code, out, _ = _run(capsys, *args, "--link", LINK, *flags)
    assert code == 0 and out.endswith("already deprecated with this reason; nothing changed\n")
    code, out, _ = _run(capsys, "modules", "--json", *flags)
    shown = {v["version"]: v["deprecation"] for v in json.loads(out)[0]["versions"]}
    assert shown == {"1.0.0": {"reason": REASON, "link": LINK}, "1.1.0": None}
    assert "1.0.0 (deprecated), 1.1.0" in _run(capsys, "modules", *flags)[1]
    code, out, _ = _run(capsys, *args, *flags)  # the same reason, the link dropped
    assert code == 0 and out.startswith("deprecation updated for module acme/vpc/aws 1.0.0")
    with _registry(module_data) as client:
        assert _entries(client)[0]["deprecation"] == {"reason": REASON, "link": ""}
    code, out, _ = _run(capsys, "module", "undeprecate", "ACME/Vpc/aws", "1.0.0", *flags)
    assert code == 0 and out.startswith("undeprecated module acme/vpc/aws 1.0.0")
    code, out, _ = _run(capsys, "module", "undeprecate", "acme/vpc/aws", "1.0.0", *flags)
    assert code == 0 and out.endswith("is not deprecated; nothing changed\n")
    with _registry(module_data) as client:
        assert _entries(client) == [{"version": "1.0.0"}, {"version": "1.1.0"}]
        assert client.get("/v1/modules/acme/vpc/aws/1.0.0").json()["deprecation"] is None


@pytest.mark.parametrize(
    ("args", "exit_code", "message"),
    [
        (["deprecate", "acme/net/aws", "1.0.0", "--reason", "x"], 1, "acme/net/aws is not regis"),
        (["deprecate", "acme/vpc/aws", "9.9.9", "--reason", "x"], 1, "has no version 9.9.9"),
        (["undeprecate", "acme/vpc/aws", "2.0.0"], 1, "has no version 2.0.0"),
        (["undeprecate", "acme/vpc", "1.0.0"], 2, "NAMESPACE/NAME/SYSTEM"),
        (["deprecate", "acme/vpc/aws", "one", "--reason", "x"], 2, "not a semantic version"),
        (["deprecate", "acme/vpc/aws", "1.0.0", "--reason", "  "], 2, "--reason must say why"),
        (["deprecate", "acme/vpc/aws", "1.0.0", "--reason", "a\x1b[2Jb"], 2, "control char"),
        (["deprecate", "acme/vpc/aws", "1.0.0", "--reason", "x" * 1001], 2, "longer than"),
        (
            ["deprecate", "acme/vpc/aws", "1.0.0", "--reason", "x", "--link", "javascript:x()"],
            2,
            "--link must be an absolute https://",
        ),
        (
            ["deprecate", "acme/vpc/aws", "1.0.0", "--reason", "x", "--link", "/docs/upgrade"],
            2,
            "--link must be an absolute https://",
        ),
        (["deprecate", "acme/vpc/aws", "1.0.0"], 2, "--reason"),
    ],
)
def test_unknown_names_exit_1_and_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str],
    module_data: Path,
    args: list[str],
    exit_code: int,
    message: str,
) -> None:
    try:
        code, out, err = _run(capsys, "module", *args, "--data-dir", str(module_data))
    except SystemExit as stop:  # argparse itself refuses a missing --reason
        code, (out, err) = int(str(stop.code)), capsys.readouterr()
    assert (code, out) == (exit_code, "")
    assert err.startswith(("gitreg: error: ", "usage: ")) and message in err
    with _registry(module_data) as client:
        assert _entries(client) == [{"version": "1.0.0"}, {"version": "1.1.0"}]


def _get(server: RunningServer, path: str) -> Any:
    request = urllib.request.Request(server.url + path)
    with urllib.request.urlopen(request, context=server.ssl_context(), timeout=10) as answer:
        return json.loads(answer.read())


def test_deprecation_reaches_a_running_server(
    module_data: Path, servers: Callable[..., RunningServer]
) -> None:
    server = servers(module_data)

    def first() -> Any:
        return _get(server, VERSIONS)["modules"][0]["versions"][0]

    assert first() == {"version": "1.0.0"}  # now cached by the server
    cli(module_data, "module", "deprecate", "acme/vpc/aws", "1.0.0", "--reason", REASON)
    expected = {"version": "1.0.0", "deprecation": {"reason": REASON, "link": ""}}
    deadline = time.monotonic() + NOTICE_DEADLINE
    while (seen := first()) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen == expected
    assert _get(server, "/v1/modules/acme/vpc/aws/1.0.0")["deprecation"]["reason"] == REASON


def test_deprecation_on_postgresql_reaches_another_replica(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    make_repo: Callable[[str], GitRepo],
    postgres_database: Database,
) -> None:
    key = tmp_path / "secret.key"
    key.write_text(os.urandom(32).hex())
    key.chmod(0o600)
    repo = make_repo("vpc")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    flags = ["--data-dir", str(tmp_path / "cli"), "--database-url", postgres_database.url]
    flags += ["--secret-key-file", str(key)]
    assert _run(capsys, "repo", "add", str(repo.path), "--module", "acme/vpc/aws", *flags)[0] == 0
    replica = {"database_url": postgres_database.url, "secret_key_file": key}
    with _registry(tmp_path / "replica", **replica) as client:
        assert _entries(client) == [{"version": "1.0.0"}]  # cached by the replica
        args = ("module", "deprecate", "acme/vpc/aws", "1.0.0", "--reason", REASON)
        assert _run(capsys, *args, *flags)[0] == 0
        expected = [{"version": "1.0.0", "deprecation": {"reason": REASON, "link": ""}}]
        deadline = time.monotonic() + NOTICE_DEADLINE
        while (seen := _entries(client)) != expected and time.monotonic() < deadline:
            time.sleep(0.05)
        assert seen == expected
        assert _run(capsys, "module", "undeprecate", "acme/vpc/aws", "1.0.0", *flags)[0] == 0
        deadline = time.monotonic() + NOTICE_DEADLINE
        while (seen := _entries(client)) != [{"version": "1.0.0"}] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert seen == [{"version": "1.0.0"}]

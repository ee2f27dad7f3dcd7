"""`gitreg doctor`: one test per check of what gitreg reaches or stores, each
creating the misconfiguration for real."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.doctor.conftest import DiscoveryServer, Setup
from tests.support.fake_upstream import FakeUpstream, serve_tls
from tests.support.gitrepo import GitRepo, released_module
from tests.support.provider_dist import public_armor, publisher_key
from tests.support.server import free_port


def test_a_remote_that_is_gone_fails(
    setup: Setup, capsys: pytest.CaptureFixture[str], make_repo: Callable[[str], GitRepo]
) -> None:
    kept = released_module(make_repo("kept"))
    gone = released_module(make_repo("gone"))
    setup.run(capsys, "repo", "add", str(kept.path), "--module", "a/kept/aws")
    setup.run(capsys, "repo", "add", str(gone.path), "--module", "a/gone/aws")
    shutil.rmtree(gone.path)
    code, checks = setup.doctor(capsys)
    assert code == 1
    assert checks["remotes"]["status"] == "FAIL"
    message = checks["remotes"]["message"]
    assert "1 of 2" in message and str(gone.path) in message and str(kept.path) not in message


def test_repositories_without_a_webhook_secret_warn(
    setup: Setup, capsys: pytest.CaptureFixture[str], make_repo: Callable[[str], GitRepo]
) -> None:
    repo = released_module(make_repo("vpc"))
    setup.run(capsys, "repo", "add", str(repo.path), "--module", "a/vpc/aws")
    code, checks = setup.doctor(capsys)
    assert code == 0  # polling still publishes; a warning, not a failure
    assert checks["webhook_secrets"]["status"] == "warn"
    assert "no webhook secret" in checks["webhook_secrets"]["message"]


def test_a_webhook_secret_reference_that_reads_empty_fails(
    setup: Setup, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DOCTOR_TEST_UNSET_SECRET", raising=False)
    setup.write_config(webhook_secret="env:DOCTOR_TEST_UNSET_SECRET")
    code, checks = setup.doctor(capsys)
    assert code == 1
    assert checks["webhook_secrets"]["status"] == "FAIL"
    monkeypatch.setenv("DOCTOR_TEST_UNSET_SECRET", "now-set-secret")
    code, out = setup.run(capsys, "doctor")
    assert code == 0 and "now-set-secret" not in out


def test_a_non_rsa_signing_key_fails(
    setup: Setup, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    armor = tmp_path / "ed25519.asc"
    armor.write_bytes(public_armor(publisher_key("ed25519")))
    setup.run(capsys, "key", "add", "acme", str(armor))
    code, checks = setup.doctor(capsys)
    assert code == 1
    assert checks["signing_keys"]["status"] == "FAIL"
    assert "acme/" in checks["signing_keys"]["message"]
    # Allowed on purpose, it is still worth a warning.
    setup.write_config(allow_unverifiable_keys=True)
    _, checks = setup.doctor(capsys)
    assert checks["signing_keys"]["status"] == "warn"


def test_an_unreachable_public_url_fails(setup: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    setup.write_config(public_url=f"http://127.0.0.1:{free_port()}")  # nothing listens
    code, checks = setup.doctor(capsys)
    assert code == 1
    assert checks["public_url"]["status"] == "FAIL"
    assert "unreachable" in checks["public_url"]["message"]


def test_a_public_url_that_is_not_gitreg_fails(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    setup.write_config(public_url=setup.public_url + "/somewhere-else")  # answers 404
    code, checks = setup.doctor(capsys)
    assert code == 1
    assert checks["public_url"]["status"] == "FAIL"
    assert "answered 404" in checks["public_url"]["message"]


def test_an_unreachable_mirror_upstream_fails_and_a_reachable_one_passes(
    setup: Setup,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup.write_config(upstream=f"registry.example=https://127.0.0.1:{free_port()}")
    code, checks = setup.doctor(capsys)
    assert code == 1
    assert checks["mirror_upstream"]["status"] == "FAIL"
    with serve_tls(FakeUpstream(), tmp_path / "upstream-tls") as served:
        monkeypatch.setenv("SSL_CERT_FILE", str(served.ca_pem))
        setup.write_config(upstream=f"registry.example={served.url}")
        code, checks = setup.doctor(capsys)
    assert code == 0
    assert checks["mirror_upstream"]["status"] == "ok"


def test_a_skewed_clock_fails(
    setup: Setup, capsys: pytest.CaptureFixture[str], discovery: DiscoveryServer
) -> None:
    # public_url's Date header says ten minutes later than this machine's clock.
    discovery.clock_offset = 600.0
    code, checks = setup.doctor(capsys)
    assert code == 1
    assert checks["clock"]["status"] == "FAIL"
    assert "s off" in checks["clock"]["message"] and "NTP" in checks["clock"]["message"]
    discovery.clock_offset = 0.0
    code, checks = setup.doctor(capsys)
    assert checks["clock"]["status"] == "ok"


def test_credentials_in_an_unreachable_remote_are_not_printed(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    setup.write_config(allow_http_remotes=True)
    url = f"http://doctor:hunter2-token@127.0.0.1:{free_port()}/acme/vpc.git"  # nothing listens
    assert setup.run(capsys, "repo", "add", url, "--module", "a/vpc/aws", "--no-sync")[0] == 0
    code, checks = setup.doctor(capsys)
    assert code == 1
    assert checks["remotes"]["status"] == "FAIL"
    assert "hunter2-token" not in checks["remotes"]["message"]
    assert "***@127.0.0.1" in checks["remotes"]["message"]

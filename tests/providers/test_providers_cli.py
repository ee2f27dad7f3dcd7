"""The provider commands as a user types them (in-process `gitreg.cli.main`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gitreg.cli import main
from tests.support.provider_dist import make_dist, public_armor, publisher_key

BINARY = b"\x7fELF fake" * 300


def _run(capsys: pytest.CaptureFixture[str], data: Path, *args: str) -> tuple[int, str, str]:
    code = main([*args, "--data-dir", str(data)])
    out, err = capsys.readouterr()
    return code, out, err


def test_repo_add_takes_a_module_or_a_provider_not_both(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["repo", "add", str(tmp_path), "--module", "a/b/c", "--provider", "a/b"])
    assert caught.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_repo_add_provider_needs_a_forge_it_can_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    code, _, err = _run(capsys, data, "repo", "add", str(tmp_path), "--provider", "acme/null")
    assert code == 2 and "--forge" in err
    code, _, err = _run(
        capsys, data, "repo", "add", str(tmp_path), "--provider", "acme/null", "--forge", "nope"
    )
    assert code == 1 and "no forge named 'nope'" in err
    code, out, _ = _run(
        capsys,
        data,
        "repo",
        "add",
        str(tmp_path),
        "--provider",
        "acme/null",
        "--forge",
        "github",
        "--forge-repo",
        "acme/terraform-provider-null",
        "--no-sync",
    )
    assert code == 0 and "registered provider acme/null" in out
    code, out, _ = _run(capsys, data, "providers", "--json")
    assert json.loads(out)[0]["forge_repo"] == "acme/terraform-provider-null"


def test_key_commands_warn_and_refuse_what_terraform_cannot_verify(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    ed = tmp_path / "ed.asc"
    ed.write_bytes(public_armor(publisher_key("ed25519")))
    code, out, err = _run(capsys, data, "key", "add", "acme", str(ed))
    assert code == 0 and "registered key" in out
    assert "warning" in err and "cannot verify" in err
    code, _, err = _run(capsys, data, "key", "generate", "acme", "--algorithm", "ed25519")
    assert code == 2 and "does not generate ed25519" in err
    code, out, _ = _run(capsys, data, "keys", "--json")
    assert [k["terraform_compatible"] for k in json.loads(out)] == [False]


@pytest.mark.slow
def test_a_generated_key_names_its_algorithm_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    code, out, _ = _run(capsys, data, "key", "generate", "acme")
    assert code == 0
    assert re.fullmatch(
        r"generated key [0-9A-F]{16} \(rsa3072\) for namespace acme", out.split("\n")[0]
    )
    code, out, _ = _run(capsys, data, "keys")
    assert code == 0 and out.rstrip().endswith(" 0 version(s)  rsa3072")
    algorithms = json.loads(_run(capsys, data, "keys", "--json")[1])[0]["algorithms"]
    assert len(algorithms) > 1 and set(algorithms) == {"rsa3072"}  # one per key packet


def test_publish_a_dist_directory_and_list_hashes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    key = tmp_path / "publisher.asc"
    key.write_bytes(public_armor(publisher_key()))
    assert _run(capsys, data, "key", "add", "acme", str(key))[0] == 0
    dist = make_dist("null", "0.1.0", ["linux_amd64", "windows_amd64"], BINARY, publisher_key())
    directory = dist.write(tmp_path / "dist")
    (directory / "metadata.json").write_text("{}")
    (directory / "terraform-provider-null_linux_amd64_v1").mkdir()
    code, out, _ = _run(capsys, data, "provider", "publish", "acme/null", "0.1.0", str(directory))
    assert code == 0 and out.startswith("published acme/null 0.1.0")
    code, out, _ = _run(capsys, data, "provider", "publish", "acme/null", "0.1.0", str(directory))
    assert code == 0 and out.startswith("unchanged")
    code, out, _ = _run(capsys, data, "providers", "--json")
    packages = json.loads(out)[0]["versions"][0]["packages"]
    assert {p["platform"] for p in packages} == {"linux_amd64", "windows_amd64"}
    assert all(
        p["hashes"][0].startswith("h1:") and p["hashes"][1].startswith("zh:") for p in packages
    )
    code, out, _ = _run(capsys, data, "providers")
    assert "h1:" in out and "zh:" in out
    code, out, _ = _run(
        capsys,
        data,
        "key",
        "retire",
        "acme",
        json.loads(_run(capsys, data, "keys", "--json")[1])[0]["key_id"],
    )
    assert code == 0 and "1 version(s) it signed keep serving it" in out


def test_upload_without_a_token_is_refused_before_any_request(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITREG_TOKEN", raising=False)
    code, _, err = _run(
        capsys,
        tmp_path / "data",
        "provider",
        "publish",
        "acme/null",
        "0.1.0",
        str(tmp_path),
        "--url",
        "https://127.0.0.1:9",
    )
    assert code == 2 and "publish token" in err
    assert not (tmp_path / "data").exists()

"""End to end: the real Terraform CLI through a cold mirror.

A cold VERSION.json lists only `zh:` (the zip's sha256 from the signed
SHA256SUMS) for a package not yet held, and the zip is sent while it arrives,
its `h1:` computed after the last byte went out (docs/mirror.md, "Cold
VERSION.json"). Terraform must still install and verify the package, write a
lock file that a later `terraform init` against the warm mirror accepts, and
refuse a tampered zip, of which the mirror keeps nothing. Run with the pinned
Terraform 1.0.3 and with the newer `terraform` on PATH when there is one.

    terraform --(network_mirror)--> gitreg serve --(registry.terraform.io=...)--> fake upstream
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitreg.mirror.config import read_lock_file
from tests.support.fake_upstream import FakeUpstream, ServedUpstream, serve_tls
from tests.support.server import RunningServer, cli
from tests.support.terraform import null_provider_binary, run_terraform, terraform_binary


def _binaries() -> list[Path | None]:
    """None: the pinned 1.0.3; plus the `terraform` on PATH when it is another one."""
    found = shutil.which("terraform")
    if found is None:
        return [None]
    newer = Path(found).resolve()
    if newer == terraform_binary().resolve():
        return [None]
    return [None, newer]


def _config(version: str) -> str:
    return (
        'terraform {\n  required_providers {\n    null = {\n      source  = "hashicorp/null"\n'
        f'      version = "{version}"\n    }}\n  }}\n}}\n'
    )


def _workdir(path: Path, version: str) -> Path:
    path.mkdir(parents=True)
    (path / "main.tf").write_text(_config(version))
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedUpstream]:
    fake = FakeUpstream()
    # 2.1.2 is genuine; 2.1.1's zip is tampered with on the wire (one byte flipped,
    # same length): its signed SHA256SUMS and metadata are the genuine ones.
    fake.add("hashicorp", "null", ["2.1.1", "2.1.2"], binary=null_provider_binary().read_bytes())
    fake.faults["2.1.1"] = "tampered"
    with serve_tls(fake, tmp_path_factory.mktemp("upstream-tls")) as running:
        yield running


def _mirrored(data_dir: Path) -> list[dict[str, Any]]:
    return list(json.loads(cli(data_dir, "mirror", "list", "--json").stdout))


def _wait_until_stored(data_dir: Path, version: str) -> dict[str, Any]:
    """The fill stores the package after Terraform got its bytes (h1 comes after)."""
    deadline = time.monotonic() + 60
    while True:
        found = [p for p in _mirrored(data_dir) if p.get("version") == version]
        if found:
            return found[0]
        assert time.monotonic() < deadline, f"the mirror never stored {version}"
        time.sleep(0.1)


@pytest.mark.parametrize("binary", _binaries(), ids=lambda b: "pinned" if b is None else "path")
def test_terraform_installs_through_a_cold_mirror_and_refuses_a_tampered_zip(
    tmp_path: Path, servers: Any, served: ServedUpstream, binary: Path | None
) -> None:
    data_dir = tmp_path / "mirror"
    mirror: RunningServer = servers(
        data_dir,
        "--upstream",
        f"registry.terraform.io={served.url}",
        env={"SSL_CERT_FILE": str(served.ca_pem), "GITREG_MIRROR_PLATFORMS": "linux_amd64"},
    )
    cli_config = (
        f'provider_installation {{\n  network_mirror {{\n    url = "{mirror.url}/mirror/"\n'
        "  }\n}\n"
    )

    def terraform(workdir: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_terraform(
            workdir, "init", ca_pem=mirror.ca_pem, cli_config=cli_config, binary=binary, check=check
        )

    # Cold: nothing held, so VERSION.json lists the signed zh: alone.
    first = _workdir(tmp_path / "first", "2.1.2")
    init = terraform(first)
    assert "Installed hashicorp/null v2.1.2 (verified checksum)" in init.stdout
    stored = _wait_until_stored(data_dir, "2.1.2")
    (locked,) = read_lock_file(first / ".terraform.lock.hcl").values()
    # Terraform records the h1: of what it unpacked: the one the mirror computed later.
    assert stored["hashes"][0] in locked.hashes

    # Warm, with that lock file: VERSION.json now lists h1: and zh:, and the lock holds.
    second = _workdir(tmp_path / "second", "2.1.2")
    shutil.copy(first / ".terraform.lock.hcl", second / ".terraform.lock.hcl")
    again = terraform(second)
    assert "Installed hashicorp/null v2.1.2 (verified checksum)" in again.stdout
    assert read_lock_file(second / ".terraform.lock.hcl") == read_lock_file(
        first / ".terraform.lock.hcl"
    )

    # Tampered: listed with the signed zh:, cut off short of its tail, never kept.
    blobs = sorted(p.name for p in (data_dir / "blobs").rglob("*") if p.is_file())
    third = _workdir(tmp_path / "third", "2.1.1")
    refused = terraform(third, check=False)
    assert refused.returncode != 0, refused.stdout
    assert "Installed hashicorp/null" not in refused.stdout
    assert "signed SHA256SUMS says" in mirror.log()
    assert [p for p in _mirrored(data_dir) if p.get("version") == "2.1.1"] == []
    assert sorted(p.name for p in (data_dir / "blobs").rglob("*") if p.is_file()) == blobs

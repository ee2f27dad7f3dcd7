"""`gitreg mirror sync` picks the versions Terraform picks, and fills the cache.

The last test asks the real Terraform CLI (v1.0.3) to install the same
configuration from gitreg's mirror, with the upstream unreachable, and compares
the versions it writes into `.terraform.lock.hcl` with sync's choices.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitreg.mirror.config import read_lock_file
from tests.support.fake_upstream import FakeUpstream, ServedUpstream, serve_tls
from tests.support.provider_dist import make_dist
from tests.support.server import RunningServer, cli, free_port
from tests.support.terraform import run_terraform

CONFIG = """terraform {
  required_providers {
    null = {
      source  = "hashicorp/null"
      version = "~> 1.1"
    }
    random = {
      source  = "hashicorp/random"
      version = ">= 2.1"
    }
    tls = {
      source  = "hashicorp/tls"
      version = "3.1.0"
    }
  }
}
"""
EXPECTED = {
    "registry.terraform.io/hashicorp/null": "1.2.0",
    "registry.terraform.io/hashicorp/random": "3.0.0",
    "registry.terraform.io/hashicorp/tls": "3.1.0",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedUpstream]:
    fake = FakeUpstream()
    both = ("linux_amd64", "darwin_arm64")
    fake.add("hashicorp", "null", ["1.0.0", "1.1.0", "1.2.0", "1.3.0-rc1", "2.0.0"], both)
    fake.add("hashicorp", "random", ["2.0.0", "2.3.1", "3.0.0", "3.1.0-beta1"], both)
    fake.add("hashicorp", "tls", ["3.0.0", "3.1.0", "3.1.1", "4.0.0"], both)
    with serve_tls(fake, tmp_path_factory.mktemp("upstream-tls")) as running:
        yield running


def sync(data_dir: Path, served: ServedUpstream, *args: str, check: bool = True) -> Any:
    result = cli(
        data_dir,
        "mirror",
        "sync",
        *args,
        "--json",
        "--upstream",
        f"registry.terraform.io={served.url}",
        env={"SSL_CERT_FILE": str(served.ca_pem), "GITREG_MIRROR_PLATFORMS": "linux_amd64"},
        check=check,
    )
    return result, json.loads(result.stdout) if result.stdout.strip().startswith("[") else None


def configuration(path: Path, text: str = CONFIG) -> Path:
    path.mkdir(parents=True)
    (path / "versions.tf").write_text(text)
    return path


def test_sync_selects_like_terraform_and_caches_packages(
    tmp_path: Path, served: ServedUpstream
) -> None:
    data_dir = tmp_path / "data"
    _, report = sync(data_dir, served, str(configuration(tmp_path / "config")))
    assert {r["provider"]: r["version"] for r in report} == EXPECTED
    for row in report:
        package = row["packages"]["linux_amd64"]
        assert package["status"] == "ok"
        assert package["h1"].startswith("h1:") and package["zh"].startswith("zh:")
        assert set(row["packages"]) == {"linux_amd64"}
    listing = json.loads(cli(data_dir, "mirror", "list", "--json").stdout)
    assert {(r["provider"], r["version"]) for r in listing} == set(EXPECTED.items())


def test_lock_file_versions_are_kept(tmp_path: Path, served: ServedUpstream) -> None:
    config = configuration(tmp_path / "config")
    (config / ".terraform.lock.hcl").write_text(
        'provider "registry.terraform.io/hashicorp/null" {\n  version     = "1.1.0"\n'
        '  constraints = "~> 1.1"\n}\n'
    )
    _, report = sync(tmp_path / "data", served, str(config), "--platform", "darwin_arm64")
    chosen = {r["provider"]: (r["version"], r["locked"]) for r in report}
    assert chosen["registry.terraform.io/hashicorp/null"] == ("1.1.0", True)
    assert chosen["registry.terraform.io/hashicorp/tls"] == ("3.1.0", False)
    assert all(set(r["packages"]) == {"darwin_arm64"} for r in report)


def test_unsatisfiable_and_mismatched_lock_fail_clearly(
    tmp_path: Path, served: ServedUpstream
) -> None:
    config = configuration(
        tmp_path / "config",
        CONFIG.replace('"3.1.0"', '"3.2.0"'),
    )
    (config / ".terraform.lock.hcl").write_text(
        'provider "registry.terraform.io/hashicorp/null" {\n  version = "2.0.0"\n}\n'
    )
    result, report = sync(tmp_path / "data", served, str(config), check=False)
    assert result.returncode == 1
    errors = {r["provider"]: r["error"] for r in report}
    assert "no available version matches 3.2.0" in errors["registry.terraform.io/hashicorp/tls"]
    assert "does not meet ~> 1.1" in errors["registry.terraform.io/hashicorp/null"]
    assert errors["registry.terraform.io/hashicorp/random"] == ""


def test_bad_configuration_is_a_message(tmp_path: Path, served: ServedUpstream) -> None:
    config = configuration(tmp_path / "config", "terraform {\n  required_providers {\n")
    result, _ = sync(tmp_path / "data", served, str(config), check=False)
    assert result.returncode == 2
    assert "not valid HCL" in result.stderr
    assert "Traceback" not in result.stderr


def test_terraform_installs_exactly_what_sync_selected_from_the_cache(
    tmp_path: Path, served: ServedUpstream, servers: Any
) -> None:
    data_dir = tmp_path / "data"
    config = configuration(tmp_path / "config")
    sync(data_dir, served, str(config))
    # The mirror's upstream now points at a port nobody listens on: everything
    # Terraform gets must come from the cache (index.json via stale-if-error).
    mirror: RunningServer = servers(
        data_dir,
        "--upstream",
        f"registry.terraform.io=https://127.0.0.1:{free_port()}",
        env={"GITREG_MIRROR_PLATFORMS": "linux_amd64"},
    )
    url = f"{mirror.url}/mirror/"
    cli_config = f'provider_installation {{\n  network_mirror {{\n    url = "{url}"\n  }}\n}}\n'
    run_terraform(config, "init", ca_pem=mirror.ca_pem, cli_config=cli_config)
    locks = read_lock_file(config / ".terraform.lock.hcl")
    assert {str(a): str(lock.version) for a, lock in locks.items()} == EXPECTED


def test_export_writes_a_static_mirror_terraform_installs_from(
    tmp_path: Path, served: ServedUpstream
) -> None:
    data_dir = tmp_path / "data"
    config = configuration(tmp_path / "config")
    sync(data_dir, served, str(config))
    dest = tmp_path / "static"
    exported = cli(data_dir, "mirror", "export", str(dest))
    assert "exported 3 provider(s), 3 version(s), 3 package(s)" in exported.stdout
    null = dest / "registry.terraform.io" / "hashicorp" / "null"
    assert json.loads((null / "index.json").read_text()) == {"versions": {"1.2.0": {}}}
    archive = json.loads((null / "1.2.0.json").read_text())["archives"]["linux_amd64"]
    zipped = (null / archive["url"]).read_bytes()
    assert zipped == served.upstream.providers[("hashicorp", "null")]["1.2.0"].zips["linux_amd64"]
    again = cli(data_dir, "mirror", "export", str(dest))
    assert "(0.0 MB written)" in again.stdout  # unchanged zips are kept
    # The zips are in a filesystem mirror's packed layout too.
    cli_config = (
        f'provider_installation {{\n  filesystem_mirror {{\n    path = "{dest}"\n  }}\n}}\n'
    )
    run_terraform(config, "init", cli_config=cli_config)
    locks = read_lock_file(config / ".terraform.lock.hcl")
    assert {str(a): str(lock.version) for a, lock in locks.items()} == EXPECTED


@pytest.mark.slow
def test_export_with_public_url_flag_includes_gitregs_own_providers(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    dist = make_dist("cloud", "1.4.0", ["linux_amd64"], b"binary")
    cli(data_dir, "key", "generate", "acme")
    publish = ["provider", "publish", "acme/cloud", "1.4.0", str(dist.write(tmp_path / "dist"))]
    cli(data_dir, *publish, "--sign")
    dest = tmp_path / "static"
    without = cli(data_dir, "mirror", "export", str(dest))
    assert "gitreg's own providers were not exported" in without.stdout
    exported = cli(
        data_dir, "mirror", "export", "--public-url", "https://registry.example.com", str(dest)
    )
    assert "not exported" not in exported.stdout
    cloud = dest / "registry.example.com" / "acme" / "cloud"
    assert json.loads((cloud / "index.json").read_text()) == {"versions": {"1.4.0": {}}}
    archive = json.loads((cloud / "1.4.0.json").read_text())["archives"]["linux_amd64"]
    assert (cloud / archive["url"]).read_bytes() == dist.files[dist.zip_name("linux_amd64")]

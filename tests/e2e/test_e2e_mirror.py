"""End to end: the real Terraform CLI installs the real null provider through
gitreg's network mirror, pulled through from another gitreg acting as
registry.terraform.io, and again from the cache after that upstream is gone.

    terraform --(network_mirror)--> gitreg mirror --(registry.terraform.io=...)--> gitreg upstream
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gitreg.mirror.config import read_lock_file
from tests.support.provider_dist import make_dist
from tests.support.server import cli
from tests.support.terraform import null_provider_binary, run_terraform

CONFIG = """terraform {
  required_providers {
    null = {
      source  = "hashicorp/null"
      version = "~> 2.1"
    }
  }
}

resource "null_resource" "hello" {
  triggers = {
    greeting = "hello from the mirror"
  }
}

output "greeting" {
  value = null_resource.hello.triggers.greeting
}
"""


def _workdir(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "main.tf").write_text(CONFIG)
    return path


def test_terraform_installs_null_through_the_mirror_and_from_cache(
    tmp_path: Path, servers: Any
) -> None:
    # The upstream: a second gitreg hosting hashicorp/null 2.1.2 (`provider publish`),
    # signed with a key gitreg generates for the namespace.
    upstream_data = tmp_path / "upstream"
    dist = make_dist("null", "2.1.2", ["linux_amd64"], null_provider_binary().read_bytes())
    cli(upstream_data, "key", "generate", "hashicorp")
    cli(
        upstream_data,
        "provider",
        "publish",
        "hashicorp/null",
        "2.1.2",
        str(dist.write(tmp_path / "dist")),
        "--sign",
    )
    upstream = servers(upstream_data)

    # The mirror reaches "registry.terraform.io" at the upstream's address and
    # trusts its CA through SSL_CERT_FILE; a zero TTL makes every index request
    # ask the upstream, so the second install proves stale-if-error.
    mirror = servers(
        tmp_path / "mirror",
        "--upstream",
        f"registry.terraform.io={upstream.url}",
        env={
            "SSL_CERT_FILE": str(upstream.ca_pem),
            "GITREG_MIRROR_PLATFORMS": "linux_amd64",
            "GITREG_MIRROR_INDEX_TTL": "0",
        },
    )
    cli_config = (
        f'provider_installation {{\n  network_mirror {{\n    url = "{mirror.url}/mirror/"\n'
        "  }\n}\n"
    )

    first = _workdir(tmp_path / "first")
    init = run_terraform(first, "init", ca_pem=mirror.ca_pem, cli_config=cli_config)
    assert "Installed hashicorp/null v2.1.2 (verified checksum)" in init.stdout
    applied = run_terraform(
        first, "apply", "-auto-approve", ca_pem=mirror.ca_pem, cli_config=cli_config
    )
    assert "Apply complete! Resources: 1 added" in applied.stdout
    assert 'greeting = "hello from the mirror"' in applied.stdout
    lock = read_lock_file(first / ".terraform.lock.hcl")
    (locked,) = lock.values()
    assert str(locked.address) == "registry.terraform.io/hashicorp/null"
    listed = cli(tmp_path / "mirror", "mirror", "list", "--json").stdout
    # Terraform trusts zh: hashes only from a signed registry, never from a
    # mirror (docs/mirror.md): it records the h1: of the package it installed.
    assert locked.hashes and all(h.startswith("h1:") for h in locked.hashes)
    assert locked.hashes[0] in listed  # Terraform computed the same h1 the mirror serves

    upstream.stop()
    second = _workdir(tmp_path / "second")
    again = run_terraform(second, "init", ca_pem=mirror.ca_pem, cli_config=cli_config)
    assert "Installed hashicorp/null v2.1.2 (verified checksum)" in again.stdout
    assert "serving the list from" in mirror.log()  # stale-if-error

"""Contract: the provider network mirror's cache (MirrorIndex)."""

from __future__ import annotations

from dataclasses import replace

from gitreg.mirror.store import CachedVersion, MirrorPackage
from tests.support.backends import Backend

KEY = "registry.terraform.io/hashicorp/null"
PACKAGE = MirrorPackage(
    provider_key=KEY,
    version="3.2.1",
    platform="linux_amd64",
    filename="terraform-provider-null_3.2.1_linux_amd64.zip",
    sha256="a" * 64,
    size=10,
    h1="h1:x",
    protocols=("5.0",),
    key_id="ABCDEF0123456789",
    source_url="https://releases.example/null.zip",
    fetched_at=1_700_000_000.0,
)


def test_a_version_list_round_trips_and_reports_changes(implementation: Backend) -> None:
    mirror = implementation.mirror
    versions = [CachedVersion("3.2.1", ("5.0",), ("linux_amd64",))]
    assert mirror.save_index(KEY, "registry.terraform.io", "hashicorp", "null", versions, 1.0)
    assert not mirror.save_index(KEY, "registry.terraform.io", "hashicorp", "null", versions, 2.0)
    cached = mirror.index(KEY)
    assert cached is not None and cached.versions == tuple(versions)
    assert mirror.index("registry.terraform.io/hashicorp/none") is None


def test_a_cached_package_never_changes(implementation: Backend) -> None:
    mirror = implementation.mirror
    assert mirror.add_package(PACKAGE) == PACKAGE
    assert mirror.add_package(replace(PACKAGE, sha256="b" * 64)) == PACKAGE  # older wins
    assert mirror.package(KEY, "3.2.1", "linux_amd64") == PACKAGE
    assert mirror.packages(KEY) == [PACKAGE]
    assert mirror.cached_provider_keys() == [KEY]
    assert mirror.package(KEY, "3.2.1", "darwin_arm64") is None

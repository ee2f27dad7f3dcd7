"""`gitreg oci zips`: every module version's zip built ahead of the first pull."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.oci.conftest import publish_module
from tests.support.gitrepo import GitRepo
from tests.support.provider_dist import make_services
from tests.support.server import cli


def test_zips_are_built_once_and_the_command_is_idempotent(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    data = tmp_path / "data"
    svc = make_services(data)
    publish_module(svc, make_repo("open"), "open", ("v1.0.0", "v1.1.0"))
    module = svc.index.find_module("open", "vpc", "aws")
    assert module is not None
    archives = {v.archive_sha256 for v in svc.index.versions(module.id)}
    svc.close()
    first = cli(data, "oci", "zips")
    assert first.stdout.strip() == (f"oci zips: {len(archives)} built, 0 already built, 0 failed")
    again = cli(data, "oci", "zips")
    assert again.stdout.strip() == f"oci zips: 0 built, {len(archives)} already built, 0 failed"
    svc = make_services(data)
    zips = svc.oci._store.module_zips(sorted(archives))
    assert set(zips) == archives
    assert all(svc.blobs.exists(z.zip_sha256) for z in zips.values())
    svc.close()

"""The providers service: the operations the commands and handlers call."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitreg.addresses import local_provider_address
from gitreg.errors import BadRequest, NotFound
from gitreg.services import Services
from tests.support.provider_dist import make_dist, publisher_key

ACME_NULL = local_provider_address("acme", "null")


def _publish(svc: Services, tmp_path: Path, version: str) -> None:
    dist = make_dist("null", version, ["linux_amd64"], b"binary" * 50, publisher_key())
    directory = dist.write(tmp_path / f"dist-{version}")
    published = svc.providers.publish_files(
        ACME_NULL, version, sorted(directory.iterdir()), sign=False
    )
    assert published.status == "published"


def test_providers_lists_every_version_with_its_key_and_packages(
    svc: Services, tmp_path: Path
) -> None:
    _publish(svc, tmp_path, "1.10.0")
    _publish(svc, tmp_path, "1.9.0")
    svc.providers.set_yanked(ACME_NULL, "1.9.0", True)
    [summary] = svc.providers.providers()
    assert summary.provider.address == "acme/null"
    assert summary.repo is None
    assert [v.version.version for v in summary.versions] == ["1.9.0", "1.10.0"]
    assert [v.version.yanked for v in summary.versions] == [True, False]
    [key] = svc.providers.keys("acme")
    assert {v.key_id for v in summary.versions} == {key.key.key_id}
    assert key.versions_signed == 2
    assert [p.os for p in summary.versions[0].packages] == ["linux"]


def test_set_yanked_reports_whether_anything_changed(svc: Services, tmp_path: Path) -> None:
    _publish(svc, tmp_path, "1.0.0")
    generation = svc.cache.generation
    first = svc.providers.set_yanked(local_provider_address("ACME", "Null"), "1.0.0", True)
    assert (first.address, first.version, first.changed) == ("acme/null", "1.0.0", True)
    assert svc.cache.generation != generation
    again = svc.providers.set_yanked(ACME_NULL, "1.0.0", True)
    assert not again.changed
    with pytest.raises(NotFound, match=r"has no version 2\.0\.0"):
        svc.providers.set_yanked(ACME_NULL, "2.0.0", True)
    with pytest.raises(NotFound, match="is not registered"):
        svc.providers.set_yanked(local_provider_address("acme", "other"), "1.0.0", True)


def test_export_key_by_id_or_newest(svc: Services) -> None:
    generated = svc.providers.generate_key("acme", "rsa3072")
    assert generated.secret_location
    newest = svc.providers.export_key("acme")
    assert newest == generated.key.ascii_armor
    [first, _] = svc.providers.keys("acme")
    assert svc.providers.export_key("acme", first.key.key_id.lower()) != newest
    with pytest.raises(NotFound):
        svc.providers.export_key("acme", "0000000000000000")
    with pytest.raises(NotFound):
        svc.providers.export_key("nobody")
    with pytest.raises(BadRequest):
        svc.providers.export_key("not a namespace")


def test_retire_key_counts_the_versions_it_signed(svc: Services, tmp_path: Path) -> None:
    _publish(svc, tmp_path, "1.0.0")
    [key] = svc.providers.keys("acme")
    retired = svc.providers.retire_key("acme", key.key.key_id)
    assert retired.key.retired_at is not None
    assert retired.versions_signed == 1


def test_sync_of_an_unregistered_provider_fails_before_any_work(svc: Services) -> None:
    with pytest.raises(NotFound, match="is not registered"):
        svc.providers.sync_releases(ACME_NULL)
    with pytest.raises(NotFound, match="is not registered"):
        svc.providers.ingest_tag(ACME_NULL, "v1.0.0")
    assert list(svc.providers.sync_releases()) == []

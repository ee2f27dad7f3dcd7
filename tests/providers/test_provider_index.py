"""Contract: hosted providers, their versions and signing keys (ProviderIndex)."""

from __future__ import annotations

import pytest

from gitreg.errors import Conflict, NotFound
from gitreg.providers.store import NewProviderVersion, PackageRecord
from tests.support.backends import Backend


def _key_row(implementation: Backend) -> int:
    key, _ = implementation.providers.add_key(
        "acme", "ABCDEF0123456789", "F" * 40, "armor", ("rsa",), True, "registered"
    )
    return key.id


def _version(provider_id: int, key_row: int, sha: str = "a" * 64) -> NewProviderVersion:
    package = PackageRecord("linux", "amd64", "p_1.0.0_linux_amd64.zip", sha, 10, "h1:x")
    return NewProviderVersion(
        provider_id=provider_id,
        version="1.0.0",
        protocols=("5.0",),
        shasums_filename="p_1.0.0_SHA256SUMS",
        shasums_sha256="b" * 64,
        signature_sha256="c" * 64,
        key_row=key_row,
        signed_by="publisher",
        source="test",
        packages=[package],
    )


def test_add_provider_is_idempotent_and_one_repository_owns_it(implementation: Backend) -> None:
    providers, index = implementation.providers, implementation.index
    repo = index.add_repo("https://git.example/p.git", "acme/p")
    provider = providers.add_provider("acme", "p", repo.id, "github")
    assert providers.add_provider("acme", "p", repo.id, "github").id == provider.id
    assert providers.find_provider("acme/p") == provider == providers.provider(provider.id)
    other = index.add_repo("https://git.example/q.git", "acme/q")
    with pytest.raises(Conflict):
        providers.add_provider("acme", "p", other.id, "github")


def test_a_key_is_added_once_and_retired(implementation: Backend) -> None:
    providers = implementation.providers
    key_row = _key_row(implementation)
    again, added = providers.add_key(
        "acme", "ABCDEF0123456789", "F" * 40, "armor", ("rsa",), True, "registered"
    )
    assert (again.id, added) == (key_row, False)
    assert providers.retire_key("acme", "ABCDEF0123456789").retired_at is not None
    assert providers.keys("acme", active_only=True) == []
    with pytest.raises(NotFound):
        providers.retire_key("acme", "0000000000000000")


def test_publish_round_trip_and_republish_changes_nothing(implementation: Backend) -> None:
    providers = implementation.providers
    provider = providers.add_provider("acme", "p")
    key_row = _key_row(implementation)
    assert providers.publish_provider_version(_version(provider.id, key_row)) is True
    assert providers.publish_provider_version(_version(provider.id, key_row, "d" * 64)) is False
    stored = providers.provider_version(provider.id, "1.0.0")
    assert stored is not None and stored.key_row == key_row
    (package,) = providers.packages(stored.id)
    assert package.sha256 == "a" * 64
    assert providers.packages_by_version(provider.id) == {stored.id: [package]}
    assert providers.key_use_count(key_row) == 1


def test_missing_provider_and_key_raise_not_found(implementation: Backend) -> None:
    with pytest.raises(NotFound):
        implementation.providers.provider(404)
    with pytest.raises(NotFound):
        implementation.providers.key(404)
    assert implementation.providers.find_provider("acme/none") is None

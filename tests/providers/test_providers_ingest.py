"""The one publish path: validation, refusals, no-ops, signing and rotation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitreg.errors import (
    ChecksumMismatch,
    Conflict,
    GitregError,
    IncompleteRelease,
    NotFound,
    SignatureError,
)
from gitreg.providers.collect import collect
from gitreg.providers.record import Published
from gitreg.providers.signing import parse_public_key, verify_detached
from gitreg.providers.store import ProviderRecord
from gitreg.services import Services
from tests.support.provider_dist import (
    Dist,
    key_id,
    make_dist,
    make_services,
    public_armor,
    publisher_key,
    reuse_generated_key,
    zip_bytes,
)

BINARY = b"\x7fELF fake provider binary" * 100
PLATFORMS = ("linux_amd64", "darwin_arm64")


@pytest.fixture
def provider(svc: Services) -> ProviderRecord:
    return svc.provider_publisher.store.add_provider("acme", "null")


def _publish(
    svc: Services, provider: ProviderRecord, dist: Dist, tmp_path: Path, sign: bool = False
) -> Published:
    directory = dist.write(tmp_path / f"dist-{len(list(tmp_path.iterdir()))}")
    files = collect(directory.iterdir(), provider.type, dist.version, strict=False)
    return svc.provider_publisher.publish(provider, dist.version, files, sign=sign, source="test")


def _blob(svc: Services, sha256: str) -> bytes:
    with svc.blobs.open(sha256) as blob:
        return blob.read()


def test_publisher_signed_release_is_published_with_hashes(
    svc: Services, provider: ProviderRecord, tmp_path: Path
) -> None:
    dist = make_dist("null", "1.2.0", PLATFORMS, BINARY, publisher_key(), protocols=["6.0"])
    result = _publish(svc, provider, dist, tmp_path)
    assert result.status == "published" and result.signed_by == "publisher"
    assert result.key_id == key_id(publisher_key())
    version = svc.provider_publisher.store.provider_version(provider.id, "1.2.0")
    assert version is not None and version.protocols == ("6.0",)
    # The publisher's SHA256SUMS and signature are served byte for byte.
    assert _blob(svc, version.shasums_sha256) == dist.files[dist.shasums_name]
    assert _blob(svc, version.signature_sha256) == dist.files[dist.shasums_name + ".sig"]
    packages = svc.provider_publisher.store.packages(version.id)
    assert {(p.os, p.arch) for p in packages} == {("linux", "amd64"), ("darwin", "arm64")}
    assert all(p.h1.startswith("h1:") for p in packages)


def test_identical_republish_is_a_no_op(
    svc: Services, provider: ProviderRecord, tmp_path: Path
) -> None:
    dist = make_dist("null", "1.2.0", PLATFORMS, BINARY, publisher_key())
    assert _publish(svc, provider, dist, tmp_path).status == "published"
    assert _publish(svc, provider, dist, tmp_path).status == "unchanged"
    assert len(svc.provider_publisher.store.provider_versions(provider.id)) == 1


def test_republish_with_other_bytes_is_a_409_and_nothing_is_resigned(
    svc: Services, provider: ProviderRecord, tmp_path: Path
) -> None:
    first = make_dist("null", "1.2.0", PLATFORMS, BINARY, publisher_key())
    _publish(svc, provider, first, tmp_path)
    other = make_dist("null", "1.2.0", PLATFORMS, BINARY + b"changed", publisher_key())
    with pytest.raises(Conflict) as caught:
        _publish(svc, provider, other, tmp_path)
    assert caught.value.status == 409
    version = svc.provider_publisher.store.provider_version(provider.id, "1.2.0")
    assert version is not None
    assert _blob(svc, version.shasums_sha256) == first.files[first.shasums_name]
    assert _blob(svc, version.signature_sha256) == first.files[first.shasums_name + ".sig"]


def test_adding_a_platform_to_a_published_version_is_a_409(
    svc: Services, provider: ProviderRecord, tmp_path: Path
) -> None:
    _publish(
        svc, provider, make_dist("null", "1.2.0", PLATFORMS[:1], BINARY, publisher_key()), tmp_path
    )
    with pytest.raises(Conflict):
        _publish(
            svc, provider, make_dist("null", "1.2.0", PLATFORMS, BINARY, publisher_key()), tmp_path
        )


def test_wrong_sha256_is_refused(svc: Services, provider: ProviderRecord, tmp_path: Path) -> None:
    dist = make_dist("null", "1.2.0", PLATFORMS, BINARY, publisher_key())
    # The zip changes after SHA256SUMS was made and signed.
    dist.files[dist.zip_name("linux_amd64")] = zip_bytes({"terraform-provider-null": b"evil"})
    with pytest.raises(ChecksumMismatch, match="SHA256SUMS says"):
        _publish(svc, provider, dist, tmp_path)
    assert svc.provider_publisher.store.provider_versions(provider.id) == []


def test_bad_signature_is_refused(svc: Services, provider: ProviderRecord, tmp_path: Path) -> None:
    dist = make_dist("null", "1.2.0", PLATFORMS, BINARY, publisher_key())
    sig = bytearray(dist.files[dist.shasums_name + ".sig"])
    sig[-5] ^= 0xFF
    dist.files[dist.shasums_name + ".sig"] = bytes(sig)
    with pytest.raises(SignatureError):
        _publish(svc, provider, dist, tmp_path)


def test_signature_over_other_checksums_is_refused(
    svc: Services, provider: ProviderRecord, tmp_path: Path
) -> None:
    dist = make_dist("null", "1.2.0", PLATFORMS, BINARY, publisher_key())
    dist.files[dist.zip_name("linux_amd64")] = zip_bytes({"terraform-provider-null": b"evil"})
    dist.reshasum(signer=None)  # SHA256SUMS rewritten to match, old signature kept
    with pytest.raises(SignatureError, match="does not verify"):
        _publish(svc, provider, dist, tmp_path)


def test_signature_by_unregistered_key_is_refused(
    svc: Services, provider: ProviderRecord, tmp_path: Path
) -> None:
    dist = make_dist("null", "1.2.0", PLATFORMS, BINARY, publisher_key("rsa-other"))
    with pytest.raises(SignatureError, match="not registered"):
        _publish(svc, provider, dist, tmp_path)


def test_ed25519_signature_is_refused_unless_allowed(tmp_path: Path) -> None:
    for allowed in (False, True):
        svc = make_services(tmp_path / f"data-{allowed}", allow_unverifiable_keys=allowed)
        svc.provider_publisher.keys.add("acme", public_armor(publisher_key("ed25519")))
        provider = svc.provider_publisher.store.add_provider("acme", "null")
        dist = make_dist("null", "1.2.0", PLATFORMS, BINARY, publisher_key("ed25519"))
        if allowed:
            assert _publish(svc, provider, dist, tmp_path).status == "published"
        else:
            with pytest.raises(SignatureError, match=r"Terraform 1\.0\.x cannot verify"):
                _publish(svc, provider, dist, tmp_path)


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ({"README.md": b"x"}, "no executable"),
        ({"bin/terraform-provider-null": b"x"}, "inside a directory"),
        ({"terraform-provider-null": b"x", "../../etc/cron.d/x": b"x"}, "'..'"),
    ],
)
def test_bad_zip_layouts_are_refused(
    svc: Services, provider: ProviderRecord, tmp_path: Path, members: dict[str, bytes], message: str
) -> None:
    dist = make_dist("null", "1.2.0", PLATFORMS, BINARY)
    dist.files[dist.zip_name("linux_amd64")] = zip_bytes(members)
    dist.reshasum(publisher_key())
    with pytest.raises(GitregError, match=message) as caught:
        _publish(svc, provider, dist, tmp_path)
    assert caught.value.status == 422
    assert svc.provider_publisher.store.provider_versions(provider.id) == []


def test_listed_package_missing_and_unlisted_package_are_refused(
    svc: Services, provider: ProviderRecord, tmp_path: Path
) -> None:
    dist = make_dist("null", "1.2.0", PLATFORMS, BINARY, publisher_key())
    del dist.files[dist.zip_name("darwin_arm64")]
    with pytest.raises(IncompleteRelease, match="darwin_arm64"):
        _publish(svc, provider, dist, tmp_path)
    extra = make_dist("null", "1.2.0", PLATFORMS, BINARY, publisher_key())
    extra.files[extra.zip_name("linux_arm64")] = extra.files[extra.zip_name("linux_amd64")]
    with pytest.raises(ChecksumMismatch, match="not listed"):
        _publish(svc, provider, extra, tmp_path)


def test_unsigned_upload_needs_sign(
    svc: Services, provider: ProviderRecord, tmp_path: Path
) -> None:
    dist = make_dist("null", "1.2.0", PLATFORMS, BINARY, signer=None)
    with pytest.raises(SignatureError, match="--sign"):
        _publish(svc, provider, dist, tmp_path)
    with pytest.raises(NotFound, match="gitreg key generate acme"):
        _publish(svc, provider, dist, tmp_path, sign=True)


@pytest.mark.slow
def test_sign_with_zips_only_writes_and_signs_shasums(
    svc: Services, provider: ProviderRecord, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reuse_generated_key(monkeypatch)
    key = svc.provider_publisher.keys.generate("acme")
    dist = make_dist("null", "1.2.0", PLATFORMS, BINARY, protocols=None, with_shasums=False)
    result = _publish(svc, provider, dist, tmp_path, sign=True)
    assert (result.status, result.signed_by, result.key_id) == ("published", "gitreg", key.key_id)
    version = svc.provider_publisher.store.provider_version(provider.id, "1.2.0")
    assert version is not None and version.protocols == ("5.0",)
    shasums = _blob(svc, version.shasums_sha256)
    assert shasums.decode().splitlines() == sorted(shasums.decode().splitlines())
    assert len(shasums.splitlines()) == 2
    verify_detached(
        shasums,
        _blob(svc, version.signature_sha256),
        [parse_public_key(key.ascii_armor.encode())],
        "acme",
    )


def test_rotation_keeps_old_versions_on_their_key(
    svc: Services, provider: ProviderRecord, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = svc.provider_publisher.store.keys("acme")[0]
    _publish(
        svc, provider, make_dist("null", "1.0.0", PLATFORMS, BINARY, publisher_key()), tmp_path
    )
    svc.provider_publisher.keys.retire("acme", old.key_id)
    with pytest.raises(SignatureError, match="not retired"):
        _publish(
            svc, provider, make_dist("null", "1.1.0", PLATFORMS, BINARY, publisher_key()), tmp_path
        )
    reuse_generated_key(monkeypatch)
    new = svc.provider_publisher.keys.generate("acme")
    _publish(svc, provider, make_dist("null", "1.1.0", PLATFORMS, BINARY), tmp_path, sign=True)
    store = svc.provider_publisher.store
    by_version = {
        v.version: store.key(v.key_row).key_id for v in store.provider_versions(provider.id)
    }
    assert by_version == {"1.0.0": old.key_id, "1.1.0": new.key_id}


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (b"not json", "metadata.protocol_versions"),
        (json.dumps({"metadata": {"protocol_versions": ["4.0"]}}).encode(), "5.x or 6.x"),
        (json.dumps({"metadata": {"protocol_versions": "5.0"}}).encode(), "a list"),
    ],
)
def test_bad_manifest_is_refused(
    svc: Services, provider: ProviderRecord, tmp_path: Path, manifest: bytes, message: str
) -> None:
    dist = make_dist("null", "1.2.0", PLATFORMS, BINARY)
    dist.files["terraform-provider-null_1.2.0_manifest.json"] = manifest
    dist.reshasum(publisher_key())
    with pytest.raises(GitregError, match=message):
        _publish(svc, provider, dist, tmp_path)


@pytest.mark.parametrize("version", ["v1.2.0", "1.2", "1.2.0+build5", "latest"])
def test_versions_must_be_strict_semver(
    svc: Services, provider: ProviderRecord, tmp_path: Path, version: str
) -> None:
    dist = make_dist("null", "1.2.0", PLATFORMS, BINARY, publisher_key())
    files = collect(dist.write(tmp_path / "d").iterdir(), "null", "1.2.0", strict=False)
    with pytest.raises(GitregError) as caught:
        svc.provider_publisher.publish(provider, version, files, sign=False, source="test")
    assert caught.value.status == 400

"""SHA256SUMS format, OpenPGP key checks, detached signatures and key management."""

from __future__ import annotations

import stat
from pathlib import Path

import pysequoia
import pytest

from gitreg.errors import BadRequest, NotFound, SignatureError
from gitreg.providers.checksums import format_shasums, parse_shasums
from gitreg.providers.keys import KeyManager
from gitreg.providers.signing import parse_public_key, verify_detached
from gitreg.storage.sealing import generate_key_file
from tests.support.provider_dist import (
    make_services,
    public_armor,
    publisher_key,
    reuse_generated_key,
    sign,
)

HEX = "a" * 64


def test_shasums_round_trip_in_sha256sum_format() -> None:
    text = format_shasums({"b.zip": "b" * 64, "a.zip": HEX})
    assert text == f"{HEX}  a.zip\n{'b' * 64}  b.zip\n".encode()
    assert parse_shasums(text) == {"a.zip": HEX, "b.zip": "b" * 64}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"{HEX} *a.zip\n", "binary form"),
        (f"{HEX}  a.zip\r\n", "CR line endings"),
        (f"{HEX}  a.zip\n{HEX}  a.zip\n", "twice"),
        (f"{HEX.upper()}  a.zip\n", "not '<sha256"),
        (f"{HEX} a.zip\n", "not '<sha256"),
        (f"{HEX}  ../a.zip\n", "not '<sha256"),
        ("", "empty"),
    ],
)
def test_shasums_that_terraform_would_misread_are_refused(text: str, message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        parse_shasums(text.encode())


def test_rsa_key_is_compatible_and_ed25519_is_not() -> None:
    rsa = parse_public_key(public_armor(publisher_key()))
    assert rsa.terraform_compatible
    assert rsa.key_id == rsa.fingerprint[-16:] and rsa.key_id.isupper() and len(rsa.key_id) == 16
    assert rsa.algorithms[0] == "rsa2048"
    ed = parse_public_key(public_armor(publisher_key("ed25519")))
    assert not ed.terraform_compatible
    assert any("ed25519" in p for p in ed.problems)


def test_private_keys_and_garbage_are_not_registered() -> None:
    with pytest.raises(BadRequest, match="private key"):
        parse_public_key(str(publisher_key()).encode())
    with pytest.raises(BadRequest, match="not an OpenPGP public key"):
        parse_public_key(b"-----BEGIN PGP PUBLIC KEY BLOCK-----\nnope\n")


def test_signature_verifies_and_is_stored_binary() -> None:
    key = parse_public_key(public_armor(publisher_key()))
    document = f"{HEX}  a.zip\n".encode()
    binary = sign(publisher_key(), document)
    assert verify_detached(document, binary, [key], "acme").signer == key
    # An armored signature is accepted and unwrapped: Terraform reads binary only.
    armored = pysequoia.armor(binary, pysequoia.ArmorKind.Signature).encode()
    assert verify_detached(document, armored, [key], "acme").signature == binary


def test_altered_document_fails_verification() -> None:
    key = parse_public_key(public_armor(publisher_key()))
    signature = sign(publisher_key(), b"original\n")
    with pytest.raises(SignatureError, match="does not verify"):
        verify_detached(b"tampered\n", signature, [key], "acme")


def test_signature_by_an_unregistered_key_names_the_key() -> None:
    registered = parse_public_key(public_armor(publisher_key()))
    stranger = publisher_key("rsa-other")
    signature = sign(stranger, b"doc\n")
    with pytest.raises(SignatureError, match="not registered for namespace 'acme'"):
        verify_detached(b"doc\n", signature, [registered], "acme")


def test_not_a_signature_is_refused() -> None:
    key = parse_public_key(public_armor(publisher_key()))
    with pytest.raises(SignatureError, match="not an OpenPGP signature"):
        verify_detached(b"doc\n", b"\x00garbage", [key], "acme")


@pytest.mark.slow
def test_generated_key_is_rsa_private_to_the_service_user(tmp_path: Path) -> None:
    svc = make_services(tmp_path / "data")
    manager: KeyManager = svc.provider_publisher.keys
    key = manager.generate("acme")
    assert key.origin == "generated" and key.terraform_compatible
    assert key.algorithms[0] == "rsa3072"
    secret = Path(manager.secrets.where(manager.secret_name(key)))
    assert secret == tmp_path / "data" / "keys" / "acme" / f"{key.fingerprint}.key"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE(secret.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(secret.parent.parent.stat().st_mode) == 0o700
    assert "PRIVATE KEY" in secret.read_text()
    # What gitreg signs with verifies with what it serves.
    record, material = manager.signing_key("acme")
    signature = pysequoia.sign(
        pysequoia.Tsk.from_bytes(material).signer(),
        b"doc\n",
        mode=pysequoia.SignatureMode.DETACHED,
        armor=False,
    )
    verify_detached(b"doc\n", signature, [parse_public_key(record.ascii_armor.encode())], "acme")


def test_generated_key_secret_is_shared_sealed_with_a_secret_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With secret_key_file, another process on the same database
    signs with the key one generated; nothing of it is written to the disk."""
    reuse_generated_key(monkeypatch)
    key_file = tmp_path / "secret.key"
    generate_key_file(key_file)
    first = make_services(tmp_path / "data", secret_key_file=key_file)
    second = make_services(tmp_path / "data", secret_key_file=key_file)
    try:
        key = first.provider_publisher.keys.generate("Acme")
        assert "database" in first.secrets.where(first.provider_publisher.keys.secret_name(key))
        record, material = second.provider_publisher.keys.signing_key("acme")
        assert record.fingerprint == key.fingerprint and b"PRIVATE KEY" in material
        assert not (tmp_path / "data" / "keys").exists()
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("algorithm", ["ed25519", "cv25519", "EdDSA"])
def test_keys_terraform_cannot_verify_are_never_generated(tmp_path: Path, algorithm: str) -> None:
    svc = make_services(tmp_path / "data")
    with pytest.raises(BadRequest, match=r"Terraform 1\.0\.x cannot verify"):
        svc.provider_publisher.keys.generate("acme", algorithm)
    assert svc.provider_publisher.store.keys("acme") == []


def test_registering_an_ed25519_key_warns(tmp_path: Path) -> None:
    svc = make_services(tmp_path / "data")
    registered = svc.provider_publisher.keys.add("acme", public_armor(publisher_key("ed25519")))
    assert not registered.key.terraform_compatible
    assert any("cannot verify" in w for w in registered.warnings)
    again = svc.provider_publisher.keys.add("acme", public_armor(publisher_key("ed25519")))
    assert not again.created and again.key.id == registered.key.id


def test_retired_key_no_longer_verifies(tmp_path: Path) -> None:
    svc = make_services(tmp_path / "data")
    manager = svc.provider_publisher.keys
    key = manager.add("acme", public_armor(publisher_key())).key
    assert [k.id for k, _ in manager.verification_keys("acme")] == [key.id]
    manager.retire("acme", key.key_id)
    assert manager.verification_keys("acme") == []
    assert svc.provider_publisher.store.key(key.id).retired_at is not None
    with pytest.raises(NotFound, match="gitreg key generate acme"):
        manager.signing_key("acme")

"""OpenPGP for provider checksums, through pysequoia (Sequoia-PGP's Python bindings).

What Terraform needs (TERRAFORM-CLIENT.md, Providers; spec: provider-registry-
protocol.md, Find a Provider Package): a detached BINARY signature over the
exact SHA256SUMS bytes, by a key given as ASCII armor with an upper-case
16-hex key ID. Terraform 1.0.x reads keys with golang.org/x/crypto/openpgp,
which only knows v4 keys of RSA, DSA, ElGamal and NIST-curve ECDSA/ECDH; one
key packet of any other kind (Ed25519, X25519, v6) makes it refuse the whole
key ("unsupported feature: public key type: 22", seen with 1.0.3), so a
certificate is compatible only when every key packet in it is. The reported
key ID is the primary key's, whichever subkey signed.

docs/providers.md explains why pysequoia rather than PGPy or driving gpg.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gitreg.errors import BadRequest, SignatureError

if TYPE_CHECKING:  # imported where used: pysequoia is memory a serving worker
    # need not carry (docs/performance.md); only key, signing and mirror paths need it
    import pysequoia

MAX_KEY_BYTES = 256 * 1024
MAX_SIGNATURE_BYTES = 64 * 1024
GENERATED_BITS = (3072, 4096)

# RFC 4880 / RFC 9580 public-key algorithm ids.
_RSA = {1, 2, 3}
_OLD_CLIENT_OK = {*_RSA, 16, 17}  # RSA, ElGamal, DSA
_ECC = {18, 19}  # ECDH, ECDSA: fine on NIST curves only
_NIST_OIDS = {
    bytes.fromhex("2a8648ce3d030107"): "nistp256",
    bytes.fromhex("2b81040022"): "nistp384",
    bytes.fromhex("2b81040023"): "nistp521",
}
_NAMES = {
    1: "rsa",
    2: "rsa",
    3: "rsa",
    16: "elgamal",
    17: "dsa",
    18: "ecdh",
    19: "ecdsa",
    22: "ed25519",  # legacy EdDSA; Ed25519 in practice
    25: "x25519",
    26: "x448",
    27: "ed25519",
    28: "ed448",
}


@dataclass(frozen=True)
class PublicKeyInfo:
    key_id: str  # primary key, upper-case 16 hex, as Terraform prints it
    fingerprint: str  # primary key, upper-case hex
    armor: str
    algorithms: tuple[str, ...]  # one per key packet, primary first: "rsa3072", "ed25519"
    key_ids: tuple[str, ...]  # primary and subkeys, upper-case: a signature names one
    problems: tuple[str, ...]  # why Terraform 1.0.x cannot read it; empty when it can

    @property
    def terraform_compatible(self) -> bool:
        return not self.problems


def _message(exc: BaseException) -> str:
    """pysequoia's errors carry a Rust backtrace when RUST_BACKTRACE is set."""
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _describe_key(body: bytes) -> tuple[str, str | None]:
    """(algorithm name, problem or None) for one key packet's body."""
    if len(body) < 8:
        return "unknown", "a truncated key packet"
    version, algo = body[0], body[5]
    name = _NAMES.get(algo, f"algorithm {algo}")
    if algo in _RSA and version == 4:
        name = f"rsa{int.from_bytes(body[6:8], 'big')}"
    if version != 4:
        return name, f"a version {version} key packet ({name})"
    if algo in _OLD_CLIENT_OK:
        return name, None
    if algo in _ECC:
        oid = body[7 : 7 + body[6]]
        curve = _NIST_OIDS.get(oid)
        if curve:
            return f"{name}-{curve}", None
        return f"{name}-{oid.hex()}", f"an {name} key on a curve other than NIST P-256/384/521"
    return name, f"an {name} key"


def parse_public_key(data: bytes) -> PublicKeyInfo:
    """Read one ASCII-armored or binary OpenPGP certificate; raises BadRequest."""
    if len(data) > MAX_KEY_BYTES:
        raise BadRequest(f"the key file is larger than {MAX_KEY_BYTES} bytes")
    import pysequoia
    from pysequoia.packet import PacketPile, Tag

    try:
        secret = any(
            p.tag in (Tag.SecretKey, Tag.SecretSubkey) for p in PacketPile.from_bytes(data)
        )
        certs = pysequoia.Cert.split_bytes(data)
    except Exception as exc:  # pysequoia raises bare RuntimeError/ValueError
        raise BadRequest(f"not an OpenPGP public key: {_message(exc)}") from exc
    if secret:
        raise BadRequest(
            "that is a private key; register the public key (gpg --armor --export KEYID)"
        )
    if len(certs) != 1:
        raise BadRequest(f"the file holds {len(certs)} keys; give exactly one public key")
    return _info(certs[0])


def _info(cert: pysequoia.Cert) -> PublicKeyInfo:
    from pysequoia.packet import PacketPile, Tag

    algorithms: list[str] = []
    key_ids: list[str] = []
    problems: list[str] = []
    for packet in PacketPile.from_bytes(bytes(cert)):
        if packet.tag not in (Tag.PublicKey, Tag.PublicSubkey):
            continue
        name, problem = _describe_key(packet.body)
        algorithms.append(name)
        key_ids.append((packet.key_id or "").upper())
        message = f"Terraform 1.0.x cannot read {problem}" if problem else ""
        if message and message not in problems:
            problems.append(message)
    fingerprint = cert.fingerprint.upper()
    return PublicKeyInfo(
        key_id=fingerprint[-16:],
        fingerprint=fingerprint,
        armor=str(cert),
        algorithms=tuple(algorithms),
        key_ids=tuple(key_ids),
        problems=tuple(problems),
    )


def generate_key(user_id: str, bits: int = 3072) -> tuple[str, PublicKeyInfo]:
    """A new RSA key (v4, RFC 4880 profile, no expiry): armored secret key and its info.

    RSA only: it is the one key type every Terraform version verifies."""
    if bits not in GENERATED_BITS:
        raise BadRequest(f"RSA key size must be one of {GENERATED_BITS}, got {bits}")
    import pysequoia

    suite = pysequoia.CipherSuite.RSA3k if bits == 3072 else pysequoia.CipherSuite.RSA4k
    tsk = pysequoia.Tsk.generate(
        user_id=user_id, profile=pysequoia.Profile.RFC4880, cipher_suite=suite
    )
    return str(tsk), _info(tsk.extract_certificate())


def sign_detached(secret_key: bytes, document: bytes) -> bytes:
    """A detached binary signature over `document` by the key's signing subkey."""
    import pysequoia

    try:
        signer = pysequoia.Tsk.from_bytes(secret_key).signer()
        return pysequoia.sign(signer, document, mode=pysequoia.SignatureMode.DETACHED, armor=False)
    except Exception as exc:  # a damaged key file; never leak key material in the message
        raise SignatureError(f"cannot sign with the namespace's key: {_message(exc)}") from exc


@dataclass(frozen=True)
class Verified:
    signature: bytes  # the binary signature packet, as Terraform must be given it
    signer: PublicKeyInfo  # the certificate whose key made it


def verify_detached(
    document: bytes, signature: bytes, keys: list[PublicKeyInfo], namespace: str
) -> Verified:
    """Check `signature` over `document` against a namespace's keys.

    An armored signature is accepted and converted to its binary packet (the
    same signature, only unwrapped): Terraform reads binary signatures only.
    """
    if len(signature) > MAX_SIGNATURE_BYTES:
        raise SignatureError(f"the signature is larger than {MAX_SIGNATURE_BYTES} bytes")
    import pysequoia
    from pysequoia.packet import PacketPile, SignatureType, Tag

    try:
        packets = list(PacketPile.from_bytes(signature))
        sig = pysequoia.Sig.from_bytes(signature)
    except Exception as exc:
        raise SignatureError(
            f"SHA256SUMS.sig is not an OpenPGP signature: {_message(exc)}"
        ) from exc
    if len(packets) != 1 or packets[0].tag != Tag.Signature:
        raise SignatureError("SHA256SUMS.sig must hold exactly one detached signature packet")
    if sig.version != 4:
        raise SignatureError(f"a version {sig.version} signature; Terraform verifies version 4")
    if sig.signature_type not in (SignatureType.Binary, SignatureType.Text):
        raise SignatureError(f"not a document signature ({sig.signature_type!r})")
    issuer = (sig.issuer_key_id or "").upper()
    if not issuer:
        raise SignatureError(
            "the signature has no issuer key ID subpacket, which Terraform needs to find the key"
        )
    candidates = [k for k in keys if issuer in k.key_ids]
    if not candidates:
        raise SignatureError(
            f"SHA256SUMS is signed by key {issuer}, which is not registered for namespace"
            f" {namespace!r} (or is retired); register it with `gitreg key add {namespace} KEY.asc`"
        )
    certs = [pysequoia.Cert.from_bytes(k.armor.encode()) for k in candidates]
    try:
        result = pysequoia.verify(bytes=document, store=lambda _ids: certs, signature=sig)
    except Exception as exc:
        raise SignatureError(
            f"the signature by key {issuer} does not verify: SHA256SUMS was changed after"
            f" signing, or the signature is damaged ({_message(exc)})"
        ) from exc
    signed_by = {str(v.certificate).upper() for v in result.valid_sigs}
    for key in candidates:
        if key.fingerprint in signed_by:
            return Verified(bytes(sig), key)
    raise SignatureError(f"the signature by key {issuer} does not verify")

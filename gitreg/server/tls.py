"""Self-managed local TLS for ``gitreg serve``.

Terraform only talks to registries over HTTPS, so when the operator does not supply a
certificate gitreg mints its own: a small local CA plus a server certificate signed by it.
Users then trust the CA (not the leaf) via ``SSL_CERT_FILE``, which means the server
certificate can be re-issued freely (new hostname, renewal) without anyone re-trusting.

Terraform is a Go program and Go ignores the subject CN entirely, so every name a client may
dial must be in the subjectAltName extension: ``IP:127.0.0.1``, ``IP:::1``,
``DNS:localhost`` and the host of the public URL.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
import shlex
import socket
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gitreg.settings import CA_CERT_NAME, CA_KEY_NAME, SERVER_CERT_NAME, SERVER_KEY_NAME

__all__ = ["LocalTLS", "describe_trust", "ensure_local_tls"]

LOCK_NAME = ".lock"

CA_VALIDITY = datetime.timedelta(days=3650)
# Apple rejects TLS server certs valid for more than 825 days even from private CAs, and
# some Go/browser stacks follow suit; staying at the limit keeps renewals rare but legal.
SERVER_VALIDITY = datetime.timedelta(days=825)
# Renew this long before expiry so a long-running deployment never serves an expired cert.
RENEW_BEFORE = datetime.timedelta(days=30)
# Backdate notBefore so clients with slightly slow clocks do not see a "future" cert.
CLOCK_SKEW = datetime.timedelta(hours=1)

# Names Terraform (and curl, browsers) use to reach a local server; always included.
DEFAULT_HOSTNAMES: tuple[str, ...] = ("127.0.0.1", "::1", "localhost")

_SigningKey: TypeAlias = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class LocalTLS:
    """Paths of the generated material (all absolute).

    ``cert`` holds only the leaf: clients trust ``ca_cert`` directly, so no chain is needed.
    """

    ca_cert: Path
    cert: Path
    key: Path


def _now() -> datetime.datetime:
    """Current UTC time; a separate function so tests can move the clock."""
    return datetime.datetime.now(datetime.UTC)


# --------------------------------------------------------------------------- file helpers


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` atomically, with ``mode`` applied from creation.

    The temp file is created with ``os.open(..., mode)`` and O_EXCL, so a private key is
    never readable by others even for an instant, and readers never see a half-written file.
    """
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        try:
            os.fchmod(fd, mode)  # the umask may have removed bits we want (e.g. 0644)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Persist a rename; best effort because not every platform can open directories."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _prepare_dir(tls_dir: Path) -> None:
    """Create ``tls_dir`` as 0700; it holds private keys, so tighten it if it already exists."""
    tls_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    if tls_dir.stat().st_mode & 0o777 != 0o700:
        tls_dir.chmod(0o700)


@contextmanager
def _locked(tls_dir: Path) -> Iterator[None]:
    """Serialise concurrent ``gitreg serve`` starts so they cannot mix keys and certs."""
    if sys.platform == "win32":
        yield
        return
    import fcntl

    fd = os.open(tls_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


# ------------------------------------------------------------------------------ hostnames


def _parse_host(entry: str) -> x509.GeneralName | None:
    """Turn one requested hostname into a SAN entry (IP if it parses as one, else DNS)."""
    host = entry.strip()
    if host.startswith("[") and host.endswith("]"):  # URL-style IPv6 literal
        host = host[1:-1]
    if not host:
        return None
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        pass
    host = host.rstrip(".").lower()
    if not host or any(c in host for c in ":/@ \t"):
        raise ValueError(f"not a hostname or IP address: {entry!r}")
    if not host.isascii():
        host = host.encode("idna").decode("ascii")  # SANs must hold A-labels
    return x509.DNSName(host)


def _requested_names(hostnames: Sequence[str]) -> list[x509.GeneralName]:
    """Defaults plus ``hostnames``, deduplicated, in a stable order."""
    names: list[x509.GeneralName] = []
    for entry in (*DEFAULT_HOSTNAMES, *hostnames):
        name = _parse_host(entry)
        if name is not None and name not in names:
            names.append(name)
    return names


def _cert_names(cert: x509.Certificate) -> set[x509.GeneralName]:
    """SAN entries of ``cert`` (DNS names lowercased) or an empty set if it has none."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    out: set[x509.GeneralName] = set()
    for name in san:
        if isinstance(name, x509.DNSName):
            out.add(x509.DNSName(name.value.lower()))
        elif isinstance(name, x509.IPAddress):
            out.add(name)
    return out


# -------------------------------------------------------------------------------- loading


def _load_pair(cert_path: Path, key_path: Path) -> tuple[x509.Certificate, _SigningKey] | None:
    """Load a cert and its key, or ``None`` if either is missing, unreadable or mismatched."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    if not isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        return None
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if cert.public_key().public_bytes(der, spki) != key.public_key().public_bytes(der, spki):
        return None
    if key_path.stat().st_mode & 0o077:
        key_path.chmod(0o600)  # e.g. restored from a backup with a loose umask
    return cert, key


def _fresh(cert: x509.Certificate, now: datetime.datetime) -> bool:
    """True if ``cert`` is already valid and stays valid for at least ``RENEW_BEFORE``."""
    return cert.not_valid_before_utc <= now and cert.not_valid_after_utc - now > RENEW_BEFORE


def _usable_ca(pair: tuple[x509.Certificate, _SigningKey] | None, now: datetime.datetime) -> bool:
    if pair is None:
        return False
    cert = pair[0]
    try:
        bc = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return False
    return bc.ca and _fresh(cert, now)


def _usable_server(
    pair: tuple[x509.Certificate, _SigningKey] | None,
    ca: x509.Certificate,
    wanted: Sequence[x509.GeneralName],
    now: datetime.datetime,
) -> bool:
    if pair is None:
        return False
    cert = pair[0]
    try:
        cert.verify_directly_issued_by(ca)
    except Exception:  # wrong issuer, bad signature, unsupported algorithm: just reissue
        return False
    return _fresh(cert, now) and set(wanted) <= _cert_names(cert)


# ------------------------------------------------------------------------------- issuing


def _new_key() -> ec.EllipticCurvePrivateKey:
    """P-256: universally supported (Go, OpenSSL, Apple) and fast to generate."""
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: _SigningKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _create_ca(now: datetime.datetime) -> tuple[x509.Certificate, _SigningKey]:
    """Self-signed CA limited to signing leaf certificates (pathlen 0)."""
    key = _new_key()
    name = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, f"gitreg local CA ({socket.gethostname()})")]
    )
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _create_server(
    ca: x509.Certificate,
    ca_key: _SigningKey,
    names: Sequence[x509.GeneralName],
    now: datetime.datetime,
) -> tuple[x509.Certificate, _SigningKey]:
    """Leaf for TLS server auth; every dialable name goes in the SAN (Go ignores the CN)."""
    key = _new_key()
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    not_after = min(now + SERVER_VALIDITY, ca.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gitreg server")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(list(names)), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _store(cert_path: Path, key_path: Path, cert: x509.Certificate, key: _SigningKey) -> None:
    """Key first: a crash in between leaves a mismatched pair, which the next run replaces."""
    _atomic_write(key_path, _key_pem(key), 0o600)
    _atomic_write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)


# ---------------------------------------------------------------------------------- public


def ensure_local_tls(tls_dir: Path, hostnames: Sequence[str]) -> LocalTLS:
    """Return a CA and a server certificate under ``tls_dir``, creating them only if needed.

    The CA is reused as long as it is intact and valid, so users trust it once. The server
    certificate is reissued when missing, unreadable, not signed by the CA, expiring within
    30 days, or not covering every requested hostname (so changing ``--public-url`` works).
    Otherwise nothing is written, which makes repeated calls idempotent.

    Raises ``ValueError`` for a hostname that is neither a DNS name nor an IP address.
    """
    tls_dir = Path(os.path.abspath(tls_dir))
    wanted = _requested_names(hostnames)
    ca_cert_path, ca_key_path = tls_dir / CA_CERT_NAME, tls_dir / CA_KEY_NAME
    cert_path, key_path = tls_dir / SERVER_CERT_NAME, tls_dir / SERVER_KEY_NAME

    _prepare_dir(tls_dir)
    with _locked(tls_dir):
        now = _now()
        ca_pair = _load_pair(ca_cert_path, ca_key_path)
        if ca_pair is None or not _usable_ca(ca_pair, now):
            # Only when the CA is absent or unusable anyway; users must re-trust the new one.
            ca_pair = _create_ca(now)
            _store(ca_cert_path, ca_key_path, *ca_pair)
        ca_cert, ca_key = ca_pair

        if not _usable_server(_load_pair(cert_path, key_path), ca_cert, wanted, now):
            _store(cert_path, key_path, *_create_server(ca_cert, ca_key, wanted, now))

    return LocalTLS(ca_cert=ca_cert_path, cert=cert_path, key=key_path)


def describe_trust(tls: LocalTLS) -> str:
    """Instructions to print on startup so a Terraform user can trust the local CA."""
    ca = os.path.abspath(tls.ca_cert)
    return "\n".join(
        [
            f"Serving HTTPS with a certificate from gitreg's local CA ({ca}).",
            "To let Terraform trust it, run this in the shell that runs terraform:",
            f"export SSL_CERT_FILE={shlex.quote(ca)}",
            "Note: SSL_CERT_FILE replaces the system root CAs for that shell, so this is for "
            "testing; in production use a real certificate via --tls-cert/--tls-key.",
            "(Terraform on macOS ignores SSL_CERT_FILE; add the CA to the keychain instead.)",
        ]
    )

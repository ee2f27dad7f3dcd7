"""Tests for gitreg.server.tls: generated CA/server certificates and a real TLS handshake."""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
import ssl
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from gitreg.server import tls as tlsmod
from gitreg.server.tls import LocalTLS, describe_trust, ensure_local_tls


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _sans(path: Path) -> tuple[list[str], list[str]]:
    san = _load(path).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return (
        san.get_values_for_type(x509.DNSName),
        [str(ip) for ip in san.get_values_for_type(x509.IPAddress)],
    )


def _snapshot(t: LocalTLS) -> dict[str, tuple[bytes, int, int]]:
    files = [t.ca_cert, t.ca_cert.with_name("ca-key.pem"), t.cert, t.key]
    return {p.name: (p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns) for p in files}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_sans_chain_and_extensions(tmp_path: Path) -> None:
    t = ensure_local_tls(
        tmp_path / "tls", ["Registry.Example.com", "10.1.2.3", "", "localhost", "[::1]"]
    )
    dns, ips = _sans(t.cert)
    assert sorted(dns) == ["localhost", "registry.example.com"]
    assert sorted(ips) == ["10.1.2.3", "127.0.0.1", "::1"]

    ca, cert = _load(t.ca_cert), _load(t.cert)
    cert.verify_directly_issued_by(ca)
    ca.verify_directly_issued_by(ca)

    ca_bc = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert ca_bc.critical and ca_bc.value.ca and ca_bc.value.path_length == 0
    ca_ku = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert ca_ku.key_cert_sign and ca_ku.crl_sign
    assert "gitreg local CA (" in ca.subject.rfc4514_string()

    bc = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert not bc.ca
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert aki.key_identifier == ca_ski.digest
    cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    assert cert.not_valid_after_utc - cert.not_valid_before_utc <= datetime.timedelta(days=826)
    assert all(p.is_absolute() for p in (t.ca_cert, t.cert, t.key))


def test_modes_even_with_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        t = ensure_local_tls(tmp_path / "data" / "tls", [])
    finally:
        os.umask(old)
    assert _mode(t.ca_cert.parent) == 0o700
    assert _mode(t.key) == 0o600
    assert _mode(t.ca_cert.with_name("ca-key.pem")) == 0o600
    assert not list(t.ca_cert.parent.glob("*.tmp"))


def test_second_call_is_idempotent(tmp_path: Path) -> None:
    first = ensure_local_tls(tmp_path / "tls", ["registry.example.com"])
    before = _snapshot(first)
    second = ensure_local_tls(tmp_path / "tls", ["registry.example.com"])
    assert second == first
    assert _snapshot(second) == before
    # A subset of the names already covered also reuses the certificate.
    ensure_local_tls(tmp_path / "tls", [])
    assert _snapshot(first) == before


def test_new_hostname_regenerates_server_keeps_ca(tmp_path: Path) -> None:
    t = ensure_local_tls(tmp_path / "tls", ["a.example.com"])
    ca_before = t.ca_cert.read_bytes()
    ca_key_before = t.ca_cert.with_name("ca-key.pem").read_bytes()
    cert_before, key_before = t.cert.read_bytes(), t.key.read_bytes()

    t2 = ensure_local_tls(tmp_path / "tls", ["b.example.com", "192.0.2.7"])
    assert t2.ca_cert.read_bytes() == ca_before
    assert t2.ca_cert.with_name("ca-key.pem").read_bytes() == ca_key_before
    assert t2.cert.read_bytes() != cert_before and t2.key.read_bytes() != key_before
    dns, ips = _sans(t2.cert)
    assert "b.example.com" in dns and "192.0.2.7" in ips
    _load(t2.cert).verify_directly_issued_by(_load(t2.ca_cert))


def test_expiring_server_cert_is_renewed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = ensure_local_tls(tmp_path / "tls", [])
    ca_before, cert_before = t.ca_cert.read_bytes(), t.cert.read_bytes()
    old_expiry = _load(t.cert).not_valid_after_utc

    later = old_expiry - datetime.timedelta(days=10)
    monkeypatch.setattr(tlsmod, "_now", lambda: later)
    ensure_local_tls(tmp_path / "tls", [])
    assert t.ca_cert.read_bytes() == ca_before
    assert t.cert.read_bytes() != cert_before
    assert _load(t.cert).not_valid_after_utc > later + datetime.timedelta(days=30)


def test_expired_ca_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = ensure_local_tls(tmp_path / "tls", [])
    ca_before = t.ca_cert.read_bytes()
    later = _load(t.ca_cert).not_valid_after_utc + datetime.timedelta(days=1)
    monkeypatch.setattr(tlsmod, "_now", lambda: later)
    ensure_local_tls(tmp_path / "tls", [])
    assert t.ca_cert.read_bytes() != ca_before
    _load(t.cert).verify_directly_issued_by(_load(t.ca_cert))


def test_corrupt_or_mismatched_server_key_is_replaced(tmp_path: Path) -> None:
    t = ensure_local_tls(tmp_path / "tls", [])
    t.key.write_bytes(b"garbage")
    ensure_local_tls(tmp_path / "tls", [])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(t.cert, t.key)  # raises if the pair does not match


def test_rejects_non_hostnames(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        ensure_local_tls(tmp_path / "tls", ["registry.example.com:8443"])


def test_describe_trust(tmp_path: Path) -> None:
    t = ensure_local_tls(tmp_path / "tls", [])
    lines = describe_trust(t).splitlines()
    assert f"export SSL_CERT_FILE={t.ca_cert.resolve()}" in lines or (
        f"export SSL_CERT_FILE={t.ca_cert}" in lines
    )
    assert any("--tls-cert" in line and "--tls-key" in line for line in lines)


# ------------------------------------------------------------------------- real handshake


@contextmanager
def _tls_server(t: LocalTLS) -> Iterator[int]:
    """Serve TLS on 127.0.0.1 with the generated cert; each client receives b"gitreg"."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(t.cert, t.key)
    sock = socket.create_server(("127.0.0.1", 0))
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(10)
            try:
                with ctx.wrap_socket(conn, server_side=True) as tconn:
                    tconn.sendall(b"gitreg")
            except (ssl.SSLError, OSError):
                pass  # expected for clients that reject the certificate
            finally:
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=10)
        sock.close()


def _fetch(port: int, ctx: ssl.SSLContext, server_hostname: str) -> bytes:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname=server_hostname) as conn,
    ):
        return conn.recv(16)


def test_real_handshake(tmp_path: Path) -> None:
    t = ensure_local_tls(tmp_path / "tls", ["registry.example.com"])
    only_ca = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verify + check_hostname by default
    only_ca.load_verify_locations(cafile=t.ca_cert)
    with _tls_server(t) as port:
        assert _fetch(port, only_ca, "localhost") == b"gitreg"
        assert _fetch(port, only_ca, "127.0.0.1") == b"gitreg"
        assert _fetch(port, only_ca, "registry.example.com") == b"gitreg"

        with pytest.raises(ssl.SSLCertVerificationError):
            _fetch(port, only_ca, "other.example.com")  # name not in SANs
        with pytest.raises(ssl.SSLCertVerificationError):
            _fetch(port, ssl.create_default_context(), "localhost")  # system roots only


def test_san_ip_values_are_ip_objects(tmp_path: Path) -> None:
    t = ensure_local_tls(tmp_path / "tls", ["2001:db8::1"])
    san = _load(t.cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("2001:db8::1") in san.get_values_for_type(x509.IPAddress)
    assert "2001:db8::1" not in san.get_values_for_type(x509.DNSName)

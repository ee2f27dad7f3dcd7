"""`gitreg doctor`: one test per check of this machine's own state, each
creating the misconfiguration for real."""

from __future__ import annotations

import datetime
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gitreg.cli import main
from gitreg.doctor.local import check_tls
from gitreg.settings import Settings
from gitreg.storage.index import open_index
from tests.doctor.conftest import Setup
from tests.support.gitrepo import GitRepo, released_module
from tests.support.postgres import Database
from tests.support.s3 import S3Bucket

CHECKS = [
    "settings",
    "data_dir",
    "free_space",
    "tls",
    "public_url",
    "schema",
    "blob_store",
    "remotes",
    "webhook_secrets",
    "signing_keys",
    "mirror_upstream",
    "clock",
]


def test_a_clean_setup_passes_every_check_and_json_has_one_entry_each(
    setup: Setup, capsys: pytest.CaptureFixture[str], make_repo: Callable[[str], GitRepo]
) -> None:
    repo = released_module(make_repo("vpc"))
    setup.run(capsys, "repo", "add", str(repo.path), "--module", "a/vpc/aws")
    setup.write_config(webhook_secret="s3cr3t-value")
    code, out = setup.run(capsys, "doctor", "--json")
    assert code == 0, out
    assert "s3cr3t-value" not in out  # secrets are checked, never printed
    code, checks = setup.doctor(capsys)
    assert list(checks) == CHECKS
    for name, check in checks.items():
        assert set(check) == {"check", "status", "message"}
        assert check["status"] == "ok", check
        assert check["message"], name
    code, text = setup.run(capsys, "doctor")
    assert code == 0
    assert [line.split()[0:2] for line in text.splitlines()] == [["ok", f"{c}:"] for c in CHECKS]


def test_a_data_dir_others_can_write_to_fails(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    setup.data.chmod(0o777)
    code, checks = setup.doctor(capsys)
    assert code == 1
    assert checks["data_dir"]["status"] == "FAIL"
    assert "chmod go-w" in checks["data_dir"]["message"]


def test_less_free_space_than_min_free_bytes_fails(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    setup.write_config(min_free_bytes=2**62)  # more than any disk this runs on
    code, checks = setup.doctor(capsys)
    assert code == 1
    assert checks["free_space"]["status"] == "FAIL"
    assert "min_free_bytes" in checks["free_space"]["message"]


def _certificate(
    tmp_path: Path, name: str, not_before: datetime.datetime, not_after: datetime.datetime
) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / f"{name}.pem", tmp_path / f"{name}-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_an_expired_certificate_fails(
    setup: Setup, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    now = datetime.datetime.now(datetime.UTC)
    cert, key = _certificate(
        tmp_path,
        "other.example",
        now - datetime.timedelta(days=90),
        now - datetime.timedelta(days=1),
    )
    setup.write_config(no_tls=False)
    code, checks = setup.doctor(capsys, "--tls-cert", str(cert), "--tls-key", str(key))
    assert code == 1
    assert checks["tls"]["status"] == "FAIL"
    assert "expired" in checks["tls"]["message"]


def test_a_certificate_not_naming_public_url_fails(
    setup: Setup, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    now = datetime.datetime.now(datetime.UTC)
    cert, key = _certificate(tmp_path, "other.example", now, now + datetime.timedelta(days=90))
    setup.write_config(no_tls=False)
    code, checks = setup.doctor(capsys, "--tls-cert", str(cert), "--tls-key", str(key))
    assert code == 1
    assert checks["tls"]["status"] == "FAIL"
    assert "does not name 127.0.0.1" in checks["tls"]["message"]
    # The same certificate passes for a public_url it names (checked alone:
    # the doctor would also try to reach that made-up host).
    named = Settings(public_url="https://other.example", tls_cert=cert, tls_key=key)
    assert check_tls(named).status == "ok"


def test_a_postgres_schema_newer_than_this_gitreg_fails(
    setup: Setup, capsys: pytest.CaptureFixture[str], postgres_database: Database
) -> None:
    open_index(postgres_database.url, setup.data / "unused.sqlite3").close()
    with psycopg.connect(postgres_database.url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO migrations (name, applied_at) VALUES ('9999_from_the_future', '')"
        )
    key = setup.data / "secret.key"
    setup.run(capsys, "secret", "generate-key", str(key))
    setup.write_config(database_url=postgres_database.url, secret_key_file=str(key))
    code, checks = setup.doctor(capsys)
    assert code == 1
    assert checks["schema"]["status"] == "FAIL"
    assert "9999_from_the_future" in checks["schema"]["message"]
    assert "upgrade gitreg" in checks["schema"]["message"]
    # The password in the URL is never printed; the index was not touched.
    assert postgres_database.url.split(":")[2].split("@")[0] not in checks["schema"]["message"]
    assert checks["remotes"]["status"] == "warn"


def test_an_older_sqlite_schema_warns_and_is_left_unmigrated(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    setup.run(capsys, "jobs", "reconcile")  # creates the index
    db = setup.data / "index.sqlite3"
    with sqlite3.connect(db) as conn:
        last = conn.execute("SELECT max(name) FROM migrations").fetchone()[0]
        conn.execute("DELETE FROM migrations WHERE name = ?", (last,))
    code, checks = setup.doctor(capsys)
    assert code == 0
    assert checks["schema"]["status"] == "warn"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT 1 FROM migrations WHERE name = ?", (last,)).fetchone() is None


def test_a_blob_store_that_cannot_be_written_fails(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    # A file where the store's temp directory belongs: root cannot write there either.
    (setup.data / "blobs").mkdir()
    (setup.data / "blobs" / "tmp").write_text("not a directory")
    code, checks = setup.doctor(capsys)
    assert code == 1
    assert checks["blob_store"]["status"] == "FAIL"


def test_postgres_and_s3_settings_pass_and_a_missing_bucket_fails(
    setup: Setup,
    capsys: pytest.CaptureFixture[str],
    postgres_database: Database,
    s3: S3Bucket,
) -> None:
    key = setup.data / "secret.key"
    setup.run(capsys, "secret", "generate-key", str(key))
    setup.write_config(
        database_url=postgres_database.url,
        secret_key_file=str(key),
        blob_store=s3.url,
        s3_addressing="path",
    )
    setup.run(capsys, "jobs", "reconcile")  # the first replica creates the schema
    code, checks = setup.doctor(capsys)
    assert code == 0, checks
    assert all(c["status"] == "ok" for c in checks.values()), checks
    assert "has this gitreg's schema" in checks["schema"]["message"]
    setup.write_config(blob_store="s3://gitreg-no-such-bucket/registry")
    code, checks = setup.doctor(capsys)
    assert code == 1
    assert checks["blob_store"]["status"] == "FAIL"
    assert "gitreg-no-such-bucket" in checks["blob_store"]["message"]


def test_a_missing_data_dir_fails_and_is_not_created(
    setup: Setup, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "mistyped"
    capsys.readouterr()
    code = main(
        [
            "doctor",
            "--json",
            "--data-dir",
            str(missing),
            "--config",
            str(setup.data / "gitreg.toml"),
        ]
    )
    checks = {c["check"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert code == 1
    assert checks["data_dir"]["status"] == "FAIL"
    assert "does not exist" in checks["data_dir"]["message"]
    assert not missing.exists()

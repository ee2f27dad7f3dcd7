"""Signed statements, the keys and the transparency log over HTTP (in process),
each checked with tests/attestations/spec_check.py, never with gitreg's code."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import logging
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from starlette.testclient import TestClient

from gitreg.addresses import module_address
from gitreg.app import create_app
from gitreg.attestations import service as attestations_service
from gitreg.audit.store import AuditQuery
from gitreg.auth.tokens import new_token, token_hash
from gitreg.module_proxy.config import parse_module_proxy
from gitreg.services import Services, build_services
from gitreg.settings import Settings, load_settings
from gitreg.storage.sealing import generate_key_file
from tests.attestations import spec_check
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.server import cli

BASE = "https://registry.example.com"
ORIGIN = "registry.example.com/v1/attestations/log"


@pytest.fixture(params=["sqlite", "postgresql"])
def app_client(
    request: pytest.FixtureRequest, tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> Iterator[tuple[TestClient, Services]]:
    values: dict[str, object] = {"data_dir": tmp_path / "data", "public_url": BASE}
    if request.param == "postgresql":
        key = tmp_path / "secret.key"
        generate_key_file(key)
        values |= {
            "database_url": request.getfixturevalue("postgres_database").url,
            "secret_key_file": key,
        }
    app = create_app(load_settings(values, environ={}))
    svc: Services = app.state.services
    for namespace in ("open", "secret"):
        repo = make_repo(namespace)
        simple_module(repo, namespace)
        repo.write("modules/sub/main.tf", "# nested\n")
        repo.commit()
        repo.tag("v1.0.0", annotated=True)
        repo.write("main.tf", "# second\n")
        repo.commit()
        repo.tag("v1.1.0")
        record = svc.index.add_repo(str(repo.path), f"{namespace}/vpc")
        svc.index.add_module(record.id, namespace, "vpc", "aws", "", "")
        svc.publisher.sync_repo(record)
    svc.auth.set_namespace_private("secret", True)
    with TestClient(app, base_url="https://testserver") as client:
        yield client, svc


def _keys(client: TestClient) -> dict[str, str]:
    answer = client.get("/v1/attestations/keys")
    assert answer.status_code == 200
    return {k["keyid"]: k["pem"] for k in answer.json()["keys"]}


def _archive_tree(svc: Services, sha256: str, into: Path) -> Path:
    with svc.blobs.open(sha256) as handle:
        data = handle.read()
    assert hashlib.sha256(data).hexdigest() == sha256
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(into, filter="data")
    return into


def test_discovery_names_the_attestations_base(app_client: tuple[TestClient, Services]) -> None:
    client, _ = app_client
    assert client.get("/.well-known/terraform.json").json()["attestations.v1"] == (
        "/v1/attestations/"
    )


def test_every_statement_verifies_independently(
    app_client: tuple[TestClient, Services], tmp_path: Path
) -> None:
    client, svc = app_client
    keys = _keys(client)
    assert len(keys) == 1
    module = svc.index.find_module("open", "vpc", "aws")
    assert module is not None
    for version in svc.index.versions(module.id):
        answer = client.get(f"/v1/modules/open/vpc/aws/{version.version}/attestation")
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "application/vnd.in-toto+json"
        statement = spec_check.dsse_payload(answer.json(), keys)
        archive, tree = statement["subject"]
        assert archive["digest"] == {"sha256": version.archive_sha256}
        extracted = _archive_tree(svc, version.archive_sha256, tmp_path / version.version)
        assert tree["digest"] == {"dirHash": spec_check.dirhash_h1(extracted)}
        build = statement["predicate"]["buildDefinition"]
        assert build["externalParameters"]["tag"] == version.tag
        assert build["resolvedDependencies"][0]["digest"] == {
            "gitCommit": version.commit_sha,
            "gitTag": version.tag_sha,
        }
        assert statement["predicate"]["runDetails"]["builder"]["id"] == BASE


def test_a_changed_byte_fails_the_signature(app_client: tuple[TestClient, Services]) -> None:
    client, _ = app_client
    keys = _keys(client)
    envelope = client.get("/v1/modules/open/vpc/aws/1.0.0/attestation").json()
    payload = bytearray(base64.b64decode(envelope["payload"]))
    payload[10] ^= 1
    forged = {**envelope, "payload": base64.b64encode(bytes(payload)).decode()}
    with pytest.raises(InvalidSignature):
        spec_check.dsse_payload(forged, keys)
    sig = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
    sig[0] ^= 1
    bad_sig = [{**envelope["signatures"][0], "sig": base64.b64encode(bytes(sig)).decode()}]
    with pytest.raises(InvalidSignature):
        spec_check.dsse_payload({**envelope, "signatures": bad_sig}, keys)


def test_a_private_statement_needs_read_access(app_client: tuple[TestClient, Services]) -> None:
    client, svc = app_client
    path = "/v1/modules/secret/vpc/aws/1.0.0/attestation"
    assert client.get(path).status_code == 401
    token = new_token()
    svc.auth.add_token(token_hash(token), token[:12], "read", ["secret"], "", None)
    svc.cache.invalidate()
    answer = client.get(path, headers={"authorization": f"Bearer {token}"})
    assert answer.status_code == 200
    assert client.get("/v1/modules/open/vpc/aws/9.9.9/attestation").status_code == 404


def _log(client: TestClient, keys: dict[str, str]) -> tuple[int, bytes, list[bytes]]:
    note = client.get("/v1/attestations/log/checkpoint")
    assert note.status_code == 200
    assert len(keys) == 1
    origin, size, root = spec_check.open_checkpoint(note.content, *keys.values())
    assert origin == ORIGIN
    entries: list[bytes] = []
    for n in range((size + 255) // 256):
        width = min(256, size - n * 256)
        bundle = client.get("/v1/attestations/log/" + spec_check.tile_path("entries", n, width))
        assert bundle.status_code == 200
        entries += spec_check.parse_bundle(bundle.content)
    return size, root, entries


def test_log_entries_bind_statements_and_tiles_prove_the_root(
    app_client: tuple[TestClient, Services],
) -> None:
    client, _ = app_client
    keys = _keys(client)
    size, root, entries = _log(client, keys)
    assert size == 4  # two versions of two modules
    assert spec_check.mth(entries) == root
    envelope = client.get("/v1/modules/open/vpc/aws/1.1.0/attestation").json()
    digest = hashlib.sha256(base64.b64decode(envelope["payload"])).hexdigest()
    published = [json.loads(e) for e in entries]
    assert {"sha256": digest} in [e["statement"] for e in published]
    assert all("module" not in e for e in published)  # names nothing of private namespaces
    tile = client.get("/v1/attestations/log/" + spec_check.tile_path("0", 0, size))
    assert tile.headers["cache-control"] == "public, max-age=31536000, immutable"
    leaves = [hashlib.sha256(b"\x00" + e).digest() for e in entries]
    assert tile.content == b"".join(leaves)
    assert client.get("/v1/attestations/log/tile/0/000.p/9").status_code == 404
    assert client.get("/v1/attestations/log/tile/0/0").status_code == 404
    huge = "/".join(["x999"] * 7 + ["999"])
    for path in (f"tile/0/{huge}", f"tile/entries/{huge}", "tile/entries/000.p/0", "tile/-1/000"):
        assert client.get("/v1/attestations/log/" + path).status_code == 404


def test_yank_deprecate_and_rotation_are_logged(app_client: tuple[TestClient, Services]) -> None:
    client, svc = app_client
    address = module_address("open", "vpc", "aws")
    svc.modules.set_yanked(address, "1.0.0", True)
    svc.modules.deprecate(address, "1.1.0", "use 2.x")
    before = client.get("/v1/modules/open/vpc/aws/1.0.0/attestation").json()
    svc.attestations.rotate_key()
    keys = _keys(client)
    listing = client.get("/v1/attestations/keys").json()["keys"]
    assert [k["status"] for k in listing] == ["current", "retired"]
    spec_check.dsse_payload(before, keys)  # old statements verify with the retired key
    _, root, entries = _log(client, {listing[0]["keyid"]: listing[0]["pem"]})
    events = [json.loads(e)["event"] for e in entries]
    assert events[-3:] == ["yank", "deprecate", "key-rotation"]
    assert spec_check.mth(entries) == root
    audited = [e.action for e in svc.audit.entries(AuditQuery())]
    assert {"module.yank", "module.deprecate", "attestation_key.rotate"} <= set(audited)


def _old_registry(tmp_path: Path, make_repo: Callable[[str], GitRepo]) -> Settings:
    """A registry whose one version has no statement, as one published before them."""
    repo = make_repo("old")
    simple_module(repo)
    repo.commit()
    repo.tag("v1.0.0")
    data_dir = tmp_path / "data"
    cli(data_dir, "repo", "add", str(repo.path), "--module", "old/vpc/aws")
    settings = load_settings({"data_dir": data_dir}, environ={})
    svc = build_services(settings)
    try:
        with svc.index._write() as conn:  # type: ignore[attr-defined]
            conn.execute("DELETE FROM module_attestations")
    finally:
        svc.close()
    return settings


def test_versions_published_before_get_statements_on_reindex(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    settings = _old_registry(tmp_path, make_repo)
    data_dir = settings.data_dir
    assert "signed the statements of 1 versions" in cli(data_dir, "reindex").stdout
    assert "signed" not in cli(data_dir, "reindex").stdout
    app = create_app(settings)
    with TestClient(app, base_url="https://testserver") as client:
        envelope = client.get("/v1/modules/old/vpc/aws/1.0.0/attestation").json()
        spec_check.dsse_payload(envelope, _keys(client))


def test_a_backfill_reads_a_page_at_a_time_stops_when_told_and_reports_failures_once(
    tmp_path: Path,
    make_repo: Callable[[str], GitRepo],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    repo = make_repo("old")
    simple_module(repo)
    repo.commit()
    for n in range(5):
        repo.tag(f"v1.0.{n}")
    data_dir = tmp_path / "data"
    cli(data_dir, "repo", "add", str(repo.path), "--module", "old/vpc/aws")
    svc = build_services(load_settings({"data_dir": data_dir}, environ={}))
    try:
        with svc.index._write() as conn:  # type: ignore[attr-defined]
            conn.execute("DELETE FROM module_attestations")
        monkeypatch.setattr(attestations_service, "BACKFILL_PAGE", 2)
        stopped = threading.Event()
        stopped.set()
        assert svc.attestations.backfill(stopped, once=True) == 0  # a shutdown: nothing signed
        [archive] = {v.archive_sha256 for v in svc.index.versions(svc.index.modules()[0].id)}
        (data_dir / "blobs" / "sha256" / archive[:2] / archive).rename(tmp_path / "away")
        with caplog.at_level(logging.WARNING, "gitreg.attestations"):
            assert svc.attestations.backfill() == 0  # every version shares the one archive
        [line] = [r.getMessage() for r in caplog.records if "no statement" in r.getMessage()]
        assert line.startswith("5 versions have no statement yet (the first: old/vpc/aws 1.0.0")
        (tmp_path / "away").rename(data_dir / "blobs" / "sha256" / archive[:2] / archive)
        assert svc.attestations.backfill() == 5  # three pages of two
        with svc.index._write() as conn:  # type: ignore[attr-defined]
            conn.execute("DELETE FROM module_attestations")
        # A start after a backfill that went over everything skips it (every
        # version since is signed at publish); `gitreg reindex` does not.
        assert svc.attestations.backfill(once=True) == 0
        assert svc.attestations.backfill() == 5
    finally:
        svc.close()


def test_browse_api_and_page_show_the_provenance(app_client: tuple[TestClient, Services]) -> None:
    client, _ = app_client
    record = client.get("/v1/modules/open/vpc/aws/1.0.0").json()
    provenance = record["provenance"]
    envelope = client.get("/v1/modules/open/vpc/aws/1.0.0/attestation")
    statement = spec_check.dsse_payload(envelope.json(), _keys(client))
    assert provenance["archive_sha256"] == statement["subject"][0]["digest"]["sha256"]
    assert provenance["dir_hash"] == statement["subject"][1]["digest"]["dirHash"]
    assert provenance["commit"] == record["commit"]
    assert provenance["log_index"] == int(envelope.headers["gitreg-log-index"])
    assert provenance["verify_command"] == "gitreg verify --readonly ."
    page = client.get("/modules/open/vpc/aws/1.0.0")
    assert page.status_code == 200
    assert provenance["dir_hash"] in page.text
    assert provenance["archive_sha256"] in page.text
    assert "gitreg verify --readonly" in page.text


def test_versions_published_before_get_statements_at_start(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    settings = _old_registry(tmp_path, make_repo)
    with TestClient(create_app(settings), base_url="https://testserver") as client:
        path = "/v1/modules/old/vpc/aws/1.0.0/attestation"
        deadline = time.monotonic() + 20
        while client.get(path).status_code == 404 and time.monotonic() < deadline:
            time.sleep(0.05)
        spec_check.dsse_payload(client.get(path).json(), _keys(client))
        assert client.get("/v1/modules/old/vpc/aws/1.0.0").json()["provenance"] is not None


def test_a_proxied_module_has_no_statement(tmp_path: Path) -> None:
    table = {"host": "registry.terraform.io", "url": "https://up.example.com", "namespaces": ["hc"]}
    settings = load_settings({"data_dir": tmp_path / "data"}, environ={})
    settings = dataclasses.replace(settings, module_proxy=parse_module_proxy([table]))
    with TestClient(create_app(settings), base_url="https://testserver") as client:
        answer = client.get("/v1/modules/hc/net/aws/1.0.0/attestation")
        assert answer.status_code == 404
        assert answer.headers["gitreg-not-attested"] == "proxied"
        assert "proxied" in answer.json()["errors"][0]

"""The HTTP surface and credentials under hostile input.

In-process requests against a registry with a public and a private
namespace, a real `gitreg serve` for what only a real server shows (its
log), and the real CLI for what it stores.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sqlite3
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from gitreg.addresses import provider_address
from gitreg.app import create_app
from gitreg.auth.tokens import new_token, token_hash
from gitreg.errors import ConfigError, UpstreamTimeout
from gitreg.services import Services, build_services
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.server import RunningServer, cli

BASE = "https://registry.example.com"


@dataclass
class Registry:
    client: TestClient
    svc: Services

    def token(self, scope: str, namespaces: list[str]) -> str:
        token = new_token()
        self.svc.auth.add_token(token_hash(token), token[:12], scope, namespaces, "", None)
        self.svc.cache.invalidate()
        return token

    def archive_url(self, namespace: str, token: str | None = None) -> str:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        answer = self.client.get(f"/v1/modules/{namespace}/vpc/aws/1.0.0/download", headers=headers)
        assert answer.status_code == 204, answer.text
        return answer.headers["x-terraform-get"].removeprefix(BASE)


def _registry(tmp: Path, make_repo: Callable[[str], GitRepo]) -> Iterator[Registry]:
    flags = {
        "data_dir": tmp / "data",
        "public_url": BASE,
        "job_workers": 0,
        "reconcile_interval": 0,
        "mirror_allow": "",  # never reach out to a real upstream registry
        "auth_fail_limit": 1_000_000,  # hostile requests must not end in 429s only
    }
    app = create_app(load_settings(flags, environ={}))
    svc: Services = app.state.services
    for namespace in ("secret", "open"):
        repo = make_repo(f"{tmp.name}-{namespace}")
        simple_module(repo, namespace)
        repo.commit()
        repo.tag("v1.0.0")
        record = svc.index.add_repo(str(repo.path), f"{namespace}/vpc")
        svc.index.add_module(record.id, namespace, "vpc", "aws", "", "")
        svc.publisher.sync_repo(record)
    svc.auth.set_namespace_private("secret", True)
    svc.cache.invalidate()
    with TestClient(app, base_url="https://testserver") as client:
        yield Registry(client, svc)


@pytest.fixture
def registry(tmp_path: Path, make_repo: Callable[[str], GitRepo]) -> Iterator[Registry]:
    yield from _registry(tmp_path, make_repo)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    tmp = tmp_path_factory.mktemp("http-props")

    def make_repo(name: str) -> GitRepo:
        return GitRepo(tmp / name)

    yield from _registry(tmp, make_repo)


def _json_error(answer: Any, method: str = "GET") -> None:
    assert answer.status_code < 500, answer.text
    if method != "HEAD" and answer.status_code >= 400:
        assert answer.headers["content-type"] == "application/json"
        errors = answer.json()["errors"]
        assert isinstance(errors, list) and errors and all(isinstance(e, str) for e in errors)


# -- malformed addresses, versions, platforms, paths, queries --------------------------

SEGMENT = st.one_of(
    st.sampled_from(
        ["acme", "secret", "open", "vpc", "aws", "1.0.0", "v1.0.0", "linux", "amd64", "..", "%00"]
    ),
    st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=30).map(
        lambda s: quote(s, safe="")
    ),
)
PREFIXES = [
    "/v1/providers/",
    "/api/v1/providers/",
    "/v1/modules/",
    "/mirror/",
    "/admin/jobs/",
    "/archives/",
    "/.well-known/",
    "/",
]
QUERY_TEXT = st.one_of(
    st.sampled_from(["", "1", "-1", "²", "١٢٣", "9" * 40, "failed", "é", "%", "A" * 43]),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=20),
)


@settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    method=st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE"]),
    prefix=st.sampled_from(PREFIXES),
    segments=st.lists(SEGMENT, min_size=1, max_size=7),
    query=st.dictionaries(
        st.sampled_from(["state", "limit", "expires", "signature", "x"]), QUERY_TEXT, max_size=3
    ),
    authorization=st.sampled_from(["", "Bearer gitreg_nope", "Basic x", "valid-admin"]),
)
def test_random_requests_never_give_a_server_error(
    shared: Registry,
    method: str,
    prefix: str,
    segments: list[str],
    query: dict[str, str],
    authorization: str,
) -> None:
    headers: dict[str, str] = {}
    if authorization == "valid-admin":
        authorization = "Bearer " + shared.token("admin", [])
    if authorization:
        headers["authorization"] = authorization
    path = prefix + "/".join(segments)
    if query:
        path += "?" + urlencode(query)
    answer = shared.client.request(method, path, headers=headers, content=b"{}")
    _json_error(answer, method)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    method=st.sampled_from(["GET", "HEAD"]),
    expires=QUERY_TEXT,
    signature=QUERY_TEXT,
    extra=st.sampled_from(["", "&expires=1", "&signature=x", "&expires=²"]),
)
def test_signed_url_queries_are_403_never_500(
    shared: Registry, method: str, expires: str, signature: str, extra: str
) -> None:
    """Whatever the query on a private archive says, a 403, never a 500, even
    for digits that int() refuses (such as superscript two) and non-ASCII
    signatures."""
    path = shared.archive_url("secret", shared.token("read", ["secret"])).split("?")[0]
    query = urlencode({"expires": expires, "signature": signature}) + extra
    answer = shared.client.request(method, f"{path}?{query}")
    assert answer.status_code == 403, answer.text
    _json_error(answer, method)


@pytest.mark.parametrize(
    ("expires", "signature"), [("²", "x"), ("9999999999", "é"), ("١٢٣٤٥٦٧٨٩٠", "x")]
)
def test_odd_signed_url_parameters_are_forbidden(
    registry: Registry, expires: str, signature: str
) -> None:
    path = registry.archive_url("secret", registry.token("read", ["secret"])).split("?")[0]
    answer = registry.client.get(
        f"{path}?{urlencode({'expires': expires, 'signature': signature})}"
    )
    assert answer.status_code == 403
    assert answer.json()["errors"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/admin/jobs/%C2%B2"),
        ("GET", "/admin/jobs?limit=%C2%B2"),
        ("POST", "/admin/jobs/%C2%B2/retry"),
    ],
)
def test_admin_numbers_that_int_refuses_are_400(registry: Registry, method: str, path: str) -> None:
    admin = {"authorization": "Bearer " + registry.token("admin", [])}
    answer = registry.client.request(method, path, headers=admin)
    assert answer.status_code == 400, answer.text


# -- caching headers ---------------------------------------------------------------------


def test_immutable_caching_only_for_public_content_addressed_blobs(registry: Registry) -> None:
    client = registry.client
    public = registry.archive_url("open")
    answer = client.get(public)
    sha = urlsplit(public).path.split("/")[-1].removesuffix(".tar.gz")
    assert answer.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert answer.headers["etag"] == f'"{sha}"'
    assert client.get(public, headers={"if-none-match": f'"{sha}"'}).status_code == 304

    # A private blob's URL expires: no shared cache may keep it for a year.
    signed = registry.archive_url("secret", registry.token("read", ["secret"]))
    for method in ("GET", "HEAD"):
        private = client.request(method, signed)
        assert private.status_code == 200
        assert private.headers["cache-control"] == "private, no-store"

    token = registry.token("read", ["secret"])
    for path in (
        "/.well-known/terraform.json",
        "/v1/modules/open/vpc/aws/versions",
        "/v1/modules/open/vpc/aws/1.0.0/download",
        "/v1/modules/secret/vpc/aws/versions",
        "/v1/modules/secret/vpc/aws/1.0.0/download",
        "/healthz",
        "/readyz",
    ):
        metadata = client.get(path, headers={"authorization": f"Bearer {token}"})
        assert metadata.status_code in (200, 204), path
        assert "immutable" not in metadata.headers.get("cache-control", ""), path


# -- health and readiness ----------------------------------------------------------------


def test_readyz_probes_the_blob_store_once_and_names_one_cause_once(
    registry: Registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    svc = registry.svc
    probes: list[int] = []
    real = svc.blobs.check_writable

    def counted(probe_bytes: int = 0) -> None:
        probes.append(probe_bytes)
        real(probe_bytes)

    monkeypatch.setattr(svc.blobs, "check_writable", counted)
    assert registry.client.get("/readyz").status_code == 200
    assert len(probes) == 1
    monkeypatch.setattr(svc.blobs, "root", tmp_path / "no-such-blob-dir")
    answer = registry.client.get("/readyz")
    assert answer.status_code == 503
    assert [p.split(":")[0] for p in answer.json()["errors"]] == ["blob store not writable"]


def test_readyz_names_each_problem_and_healthz_needs_nothing(
    registry: Registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    svc = registry.svc

    def locked() -> None:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(svc.index, "check_writable", locked)
    monkeypatch.setattr(svc.blobs, "root", tmp_path / "no-such-blob-dir")
    monkeypatch.setattr(
        "gitreg.storage.health.shutil.disk_usage", lambda path: type("U", (), {"free": 1024**2})()
    )
    answer = registry.client.get("/readyz")
    assert answer.status_code == 503
    problems = answer.json()["errors"]
    assert any(p.startswith("index not writable: database is locked") for p in problems)
    assert any(p.startswith("blob store not writable") for p in problems)
    assert any("1 MiB free" in p for p in problems)
    # /healthz touches none of them.
    assert registry.client.get("/healthz").json() == {"status": "ok"}


# -- tokens stored hashed, scoped per namespace -------------------------------------------


def test_tokens_are_stored_only_as_hashes(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    created = cli(data_dir, "token", "create", "--scope", "read", "--namespace", "acme")
    token = created.stdout.strip().splitlines()[-1]
    assert token.startswith("gitreg_") and len(token) == 50
    listing = cli(data_dir, "token", "list", "--json").stdout
    secret = token.removeprefix("gitreg_")[5:]  # beyond the 12-character display prefix
    assert secret not in listing
    stored = b"".join(p.read_bytes() for p in data_dir.rglob("*") if p.is_file())
    assert secret.encode() not in stored
    assert token_hash(token).encode() in stored


def test_a_token_for_one_namespace_reads_nothing_private_of_another(registry: Registry) -> None:
    other = registry.token("admin", ["open"])  # even the highest scope, elsewhere
    headers = {"authorization": f"Bearer {other}"}
    for path in (
        "/v1/modules/secret/vpc/aws/versions",
        "/v1/modules/secret/vpc/aws/1.0.0/download",
    ):
        answer = registry.client.get(path, headers=headers)
        assert answer.status_code == 404, path
    assert registry.client.get("/admin/jobs", headers=headers).status_code == 403


# -- tokens never appear in logs ---------------------------------------------------------


def test_tokens_never_reach_the_log(registry: Registry, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    read = registry.token("read", ["secret"])
    admin = registry.token("admin", [])
    expired = new_token()
    registry.svc.auth.add_token(token_hash(expired), expired[:12], "read", [], "", 1.0)
    registry.svc.cache.invalidate()
    guessed = new_token()
    client = registry.client
    for token in (read, admin, expired, guessed):
        auth = {"authorization": f"Bearer {token}"}
        client.get("/v1/modules/secret/vpc/aws/versions", headers=auth)
        client.get("/admin/jobs", headers=auth)
        client.post("/webhooks/git", headers=auth, content=b'{"repository": "secret/vpc"}')
        client.post("/api/v1/providers/secret/x/1.0.0/uploads", headers=auth)
        client.get(registry.archive_url("secret", read))
    assert caplog.records  # the requests did log something
    for token in (read, admin, expired, guessed):
        assert token not in caplog.text
        assert token[12:] not in caplog.text


def test_a_real_server_logs_no_token(
    tmp_path: Path, servers: Callable[..., RunningServer], make_repo: Callable[[str], GitRepo]
) -> None:
    """uvicorn's access log and gitreg's own, at debug level, over TLS."""
    data_dir = tmp_path / "data"
    created = cli(data_dir, "token", "create", "--scope", "admin")
    token = created.stdout.strip().splitlines()[-1]
    cli(data_dir, "namespace", "set", "acme", "--private")
    server = servers(data_dir, "--log-level", "debug", "--reconcile-interval", "0")
    context = server.ssl_context()
    for path, auth in (
        ("/v1/modules/acme/vpc/aws/versions", token),
        ("/admin/jobs", token),
        ("/admin/jobs", token + "x"),
        ("/v1/modules/acme/vpc/aws/versions", "gitreg_" + "A" * 43),
    ):
        request = urllib.request.Request(
            server.url + path, headers={"Authorization": f"Bearer {auth}"}
        )
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as answer:
                answer.read()
        except urllib.error.HTTPError as error:
            error.read()
            error.close()
    server.stop()
    log = server.log()
    assert "/admin/jobs" in log  # the access log is on
    assert token not in log and token[12:] not in log


def test_signed_url_lifetime_is_at_most_15_minutes(tmp_path: Path) -> None:
    assert load_settings({"data_dir": tmp_path, "signed_url_ttl": 900}, environ={})
    with pytest.raises(ConfigError):
        load_settings({"data_dir": tmp_path, "signed_url_ttl": 901}, environ={})


# -- connect timeout ---------------------------------------------------------------------


def test_upstream_that_never_accepts_the_connection_times_out(tmp_path: Path) -> None:
    """A listener whose accept queue is full drops further SYNs: the TCP
    connection never completes, and the connect timeout ends the wait."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        try:
            for _ in range(4):
                filler = socket.socket()
                filler.setblocking(False)
                fillers.append(filler)
                with contextlib.suppress(BlockingIOError):
                    filler.connect(("127.0.0.1", port))
            flags = {
                "data_dir": tmp_path / "data",
                "upstream": f"registry.terraform.io=https://127.0.0.1:{port}/",
                "mirror_connect_timeout": 0.3,
            }
            svc = build_services(load_settings(flags, environ={}))
            address = provider_address("registry.terraform.io", "hashicorp", "null")

            async def scenario() -> None:
                try:
                    await svc.mirror.index_json(address)
                finally:
                    await svc.mirror.aclose()

            try:
                with pytest.raises(UpstreamTimeout, match="ConnectTimeout"):
                    asyncio.run(scenario())
            finally:
                svc.close()
        finally:
            for filler in fillers:
                filler.close()

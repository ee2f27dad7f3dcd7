"""Private blobs stay private on every route that serves blob bytes.

A real server holds, in a private namespace, one blob of each kind: a module
archive, a provider zip, its SHA256SUMS and signature, and a zip pulled through
the mirror from a fake upstream. Privacy comes either from `gitreg namespace set
NS --private` or from `read_default = "token"`. Every blob route of the app
(found from its route table, so a new one cannot be missed) is walked for every
blob's sha256 and file name: anonymous requests never get a 200, while the
signed URLs the metadata answers hand out, and a read token, still work, never
with a public cache header.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from starlette.routing import Mount, Route

from gitreg.app import all_routes
from gitreg.auth.signed_urls import UrlSigner
from gitreg.auth.tokens import new_token, token_hash
from gitreg.providers.collect import collect
from gitreg.services import Services
from gitreg.settings import load_settings
from gitreg.storage.secrets import file_secret_store
from tests.support.fake_upstream import FakeUpstream, ServedUpstream, serve_tls
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.provider_dist import make_dist, make_services, public_armor, publisher_key
from tests.support.server import RunningServer, cli

HOSTED = "gitreg.test"  # gitreg's own providers also appear in the mirror under this name
UPSTREAM = "registry.terraform.io"
MIRROR_VERSION = f"/mirror/{UPSTREAM}/hashicorp/null/2.1.2.json"


@dataclass(frozen=True)
class Blob:
    kind: str
    namespace: str
    filename: str
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


# Path template of each route that serves blob bytes -> the URLs that could
# reach a blob through it. A new blob route fails `test_every_blob_route_is_walked`
# until it is added here, and so walked by the anonymous test.
BLOB_ROUTES: dict[str, Callable[[Blob], list[str]]] = {
    "/archives/{sha256}.tar.gz": lambda b: [f"/archives/{b.sha256}.tar.gz"],
    "/v1/providers/{namespace}/{type}/{version}/files/{filename}": lambda b: [
        f"/v1/providers/team/null/1.2.0/files/{b.filename}"
    ],
    "/mirror/{hostname}/{namespace}/{type}/{file}": lambda b: [
        f"/mirror/{HOSTED}/team/null/{b.filename}",
        f"/mirror/{UPSTREAM}/hashicorp/null/{b.filename}",
    ],
    # OCI repositories (docs/oci.md): gitreg's own, and the mirrored provider.
    "/v2/{name:path}/blobs/{digest}": lambda b: [
        f"/v2/{repository}/blobs/sha256:{b.sha256}"
        for repository in (
            "modules/team/vpc/aws",
            "providers/team/null",
            f"providers/{HOSTED}/team/null",
            "providers/hashicorp/null",
            f"providers/{UPSTREAM}/hashicorp/null",
        )
    ],
}


@dataclass
class Registry:
    server: RunningServer
    client: httpx.Client
    token: str
    other_token: str
    signer: UrlSigner
    blobs: list[Blob]

    def auth(self, token: str | None = None) -> dict[str, str]:
        return {"authorization": f"Bearer {token or self.token}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedUpstream]:
    fake = FakeUpstream()
    fake.add("hashicorp", "null", ["2.1.2"])
    with serve_tls(fake, tmp_path_factory.mktemp("upstream-tls")) as running:
        yield running


def _publish_module(svc: Services, repo: GitRepo) -> Blob:
    simple_module(repo, "private module")
    repo.commit()
    repo.tag("v1.0.0")
    record = svc.index.add_repo(str(repo.path), "team/vpc")
    svc.index.add_module(record.id, "team", "vpc", "aws", "", "")
    svc.publisher.sync_repo(record)
    ((_, sha256),) = svc.auth.module_archives()
    with svc.blobs.open(sha256) as archive:
        return Blob("module archive", "team", f"{sha256}.tar.gz", archive.read())


def _publish_provider(svc: Services, directory: Path) -> list[Blob]:
    svc.provider_publisher.keys.add("team", public_armor(publisher_key()))
    dist = make_dist("null", "1.2.0", ["linux_amd64"], b"\x7fELF private", publisher_key())
    provider = svc.provider_publisher.store.add_provider("team", "null")
    files = collect(dist.write(directory).iterdir(), "null", "1.2.0", strict=False)
    svc.provider_publisher.publish(provider, "1.2.0", files, sign=False, source="test")
    kinds = {
        dist.zip_name("linux_amd64"): "provider zip",
        dist.shasums_name: "SHA256SUMS",
        dist.shasums_name + ".sig": "SHA256SUMS signature",
    }
    return [Blob(kind, "team", name, dist.files[name]) for name, kind in kinds.items()]


def _pull_mirror_zip(client: httpx.Client, token: str, served: ServedUpstream) -> Blob:
    """The server caches the upstream zip on the first authorised request for it."""
    headers = {"authorization": f"Bearer {token}"}
    version = client.get(MIRROR_VERSION, headers=headers)
    assert version.status_code == 200, version.text
    url = httpx.URL(f"{MIRROR_VERSION}").join(version.json()["archives"]["linux_amd64"]["url"])
    pulled = client.get(str(url), headers=headers)
    assert pulled.status_code == 200, pulled.text
    data = served.upstream.providers[("hashicorp", "null")]["2.1.2"].zips["linux_amd64"]
    assert pulled.content == data
    # The client has every byte before the fill records the blob: the walks
    # below ask for it by hash, so they start once it is recorded.
    stored = f"/archives/{hashlib.sha256(data).hexdigest()}.tar.gz"
    deadline = time.monotonic() + 30
    while client.head(stored, headers=headers).status_code != 200:
        assert time.monotonic() < deadline, "the mirror zip was never recorded"
        time.sleep(0.05)
    return Blob("mirror zip", "hashicorp", url.path.rsplit("/", 1)[1], data)


def _add_token(svc: Services, namespaces: list[str]) -> str:
    token = new_token()
    svc.auth.add_token(token_hash(token), token[:12], "read", namespaces, "test", None)
    return token


# "+s3": the blobs live in S3 (moto on 127.0.0.1), streamed by every blob route.
@pytest.fixture(params=["namespace-private", "read-default-token", "namespace-private+s3"])
def registry(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    servers: Callable[..., RunningServer],
    served: ServedUpstream,
) -> Iterator[Registry]:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    config = {
        "upstream": f"{UPSTREAM}={served.url}",
        "mirror_platforms": "linux_amd64",
        "mirror_hostnames": HOSTED,
        "job_workers": 0,
        "auth_fail_limit": 10_000,  # the walk fails many downloads on purpose
    }
    if request.param == "read-default-token":
        config["read_default"] = "token"
    if request.param.endswith("+s3"):  # the `s3` fixture sets the AWS_* variables
        config["blob_store"] = request.getfixturevalue("s3").url
        config["s3_addressing"] = "path"
    toml = "".join(f"{k} = {json.dumps(v)}\n" for k, v in config.items())
    (data_dir / "gitreg.toml").write_text(toml)
    svc = make_services(data_dir)
    try:
        blobs = [_publish_module(svc, GitRepo(tmp_path / "repo"))]
        blobs += _publish_provider(svc, tmp_path / "dist")
        token = _add_token(svc, ["team", "hashicorp"])
        other_token = _add_token(svc, ["elsewhere"])
    finally:
        svc.close()
    assert (data_dir / "blobs").exists() != request.param.endswith("+s3")
    if request.param.startswith("namespace-private"):
        for namespace in ("team", "hashicorp"):
            cli(data_dir, "namespace", "set", namespace, "--private")
    server = servers(data_dir, env={"SSL_CERT_FILE": str(served.ca_pem)})
    settings = load_settings({"data_dir": data_dir}, environ={})
    signer = UrlSigner(file_secret_store(settings.data_dir), settings.signed_url_ttl)
    with httpx.Client(base_url=server.url, verify=server.ssl_context(), timeout=30) as client:
        blobs.append(_pull_mirror_zip(client, token, served))
        yield Registry(server, client, token, other_token, signer, blobs)


def _routes() -> list[Route]:
    """Every route of the app, those inside a mount (`/v2/`) included; their
    `path` is the whole path (gitreg/oci/http.py)."""
    found: list[Route] = []
    for route in all_routes():
        if isinstance(route, Mount):
            found += [r for r in route.routes if isinstance(r, Route)]
            continue
        assert isinstance(route, Route), f"walk the routes inside {route!r} too"
        found.append(route)
    return found


def _blob_route_paths() -> set[str]:
    """Paths of the app's routes whose handler can answer with blob bytes."""
    found = set()
    for route in _routes():
        source = inspect.getsource(route.endpoint)
        if any(word in source for word in ("blob_response", "stored_blob", "FileResponse")):
            found.add(route.path)
    return found


def _every_get_url(blob: Blob) -> list[str]:
    """Every GET route of the app filled with this blob's names: a route that
    serves blobs but is missing from BLOB_ROUTES still gets asked for it."""
    values = {
        "sha256": blob.sha256,
        "filename": blob.filename,
        "file": blob.filename,
        "namespace": blob.namespace,
        "hostname": UPSTREAM if blob.kind == "mirror zip" else HOSTED,
        "type": "null",
        "name": "vpc",
        "system": "aws",
        "os": "linux",
        "arch": "amd64",
        "job_id": "1",
        "version": "1.0.0" if blob.kind == "module archive" else "1.2.0",
    }
    urls = []
    for route in _routes():
        if route.methods is None or "GET" in route.methods:
            urls.append(re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: values.get(m[1], "x"), route.path))
    return urls


def _assert_private(answer: httpx.Response, blob: Blob, url: str) -> None:
    assert answer.status_code == 200, f"{blob.kind} via {url}: {answer.status_code} {answer.text}"
    if answer.request.method == "GET":
        assert answer.content == blob.data, f"{blob.kind} via {url}"
    cache = answer.headers["cache-control"]
    assert "public" not in cache and "immutable" not in cache, f"{blob.kind} via {url}: {cache}"
    assert "no-store" in cache or "private" in cache, f"{blob.kind} via {url}: {cache}"


def test_every_blob_route_is_walked() -> None:
    assert _blob_route_paths() == set(BLOB_ROUTES), (
        "a route serves blobs: add it to BLOB_ROUTES so the access tests walk it"
    )


def test_no_route_serves_a_private_blob_anonymously(registry: Registry) -> None:
    kinds = {blob.kind for blob in registry.blobs}
    assert kinds == {
        "module archive",
        "provider zip",
        "SHA256SUMS",
        "SHA256SUMS signature",
        "mirror zip",
    }
    for blob in registry.blobs:
        for url in [u for urls in BLOB_ROUTES.values() for u in urls(blob)]:
            for method in ("GET", "HEAD"):
                answer = registry.client.request(method, url)
                assert answer.status_code in (401, 403, 404), f"{blob.kind} via {method} {url}"
                assert answer.content != blob.data
            # A token for another namespace is no better than none.
            other = registry.client.get(url, headers=registry.auth(registry.other_token))
            assert other.status_code in (403, 404), f"{blob.kind} via {url}"
        for url in _every_get_url(blob):
            answer = registry.client.get(url)
            assert not (answer.status_code == 200 and blob.data in answer.content), url


def test_a_read_token_or_a_signed_url_still_serves_each_blob_privately(
    registry: Registry,
) -> None:
    for blob in registry.blobs:
        path = f"/archives/{blob.sha256}.tar.gz"
        for method in ("GET", "HEAD"):
            with_token = registry.client.request(method, path, headers=registry.auth())
            _assert_private(with_token, blob, path)
        signed = f"{path}?{registry.signer.sign(path)}"
        _assert_private(registry.client.get(signed), blob, signed)


def test_the_urls_metadata_hands_out_work_without_credentials(registry: Registry) -> None:
    """Terraform fetches every blob without credentials, through the signed URL
    the authenticated metadata answer gave it."""
    client, auth = registry.client, registry.auth()
    by_kind = {blob.kind: blob for blob in registry.blobs}
    module = client.get("/v1/modules/team/vpc/aws/1.0.0/download", headers=auth)
    assert module.status_code == 204, module.text
    urls = {"module archive": module.headers["x-terraform-get"]}
    provider = client.get("/v1/providers/team/null/1.2.0/download/linux/amd64", headers=auth)
    assert provider.status_code == 200, provider.text
    document = provider.json()
    urls["provider zip"] = document["download_url"]
    urls["SHA256SUMS"] = document["shasums_url"]
    urls["SHA256SUMS signature"] = document["shasums_signature_url"]
    version = client.get(MIRROR_VERSION, headers=auth)
    relative = version.json()["archives"]["linux_amd64"]["url"]
    urls["mirror zip"] = str(httpx.URL(MIRROR_VERSION).join(relative))
    for kind, url in urls.items():
        assert "signature=" in url, f"{kind}: {url}"
        for method in ("GET", "HEAD"):
            _assert_private(client.request(method, url), by_kind[kind], url)


def test_bytes_also_published_in_a_public_namespace_stay_public(tmp_path: Path) -> None:
    """The same tree published under a public and a private namespace is one
    blob: it is served publicly (its bytes are public anyway), and becomes
    private with both its owners once the second namespace turns private."""
    svc = make_services(tmp_path / "data")
    try:
        repo = GitRepo(tmp_path / "repo")
        simple_module(repo, "shared")
        repo.commit()
        repo.tag("v1.0.0")
        for namespace in ("team", "open"):
            record = svc.index.add_repo(str(repo.path), f"{namespace}/vpc")
            svc.index.add_module(record.id, namespace, "vpc", "aws", "", "")
            svc.publisher.sync_repo(record)
        (sha256,) = {sha for _, sha in svc.auth.module_archives()}
        svc.auth.set_namespace_private("team", True)
        assert sha256 not in svc.access.build_snapshot().private_blobs
        svc.auth.set_namespace_private("open", True)
        owners = svc.access.build_snapshot().private_blobs[sha256]
        assert owners == {"team", "open"}
    finally:
        svc.close()

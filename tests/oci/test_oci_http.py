"""The `/v2/` read side as the distribution spec v1.1 words it: headers,
pagination, error codes and the refusal of every write."""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile

import pytest
from starlette.testclient import TestClient

from gitreg.services import Services

MODULE = "/v2/modules/open/vpc/aws"
PROVIDER = "/v2/providers/open/null"


def _codes(answer: object) -> list[str]:
    return [e["code"] for e in answer.json()["errors"]]  # type: ignore[attr-defined]


def test_api_version_check_challenges_anonymous_clients(
    registry: tuple[TestClient, Services],
) -> None:
    client, _ = registry
    answer = client.get("/v2/")
    assert answer.status_code == 401
    assert answer.headers["docker-distribution-api-version"] == "registry/2.0"
    assert answer.headers["www-authenticate"] == (
        'Bearer realm="https://registry.example.com/v2/token",service="registry.example.com"'
    )
    token = client.get("/v2/token", params={"service": "registry.example.com"}).json()["token"]
    assert client.get("/v2/", headers={"authorization": f"Bearer {token}"}).status_code == 200


def test_manifest_by_tag_has_the_spec_headers(registry: tuple[TestClient, Services]) -> None:
    client, _ = registry
    answer = client.get(f"{MODULE}/manifests/1.0.0")
    assert answer.status_code == 200
    body = answer.content
    assert answer.headers["content-type"] == "application/vnd.oci.image.manifest.v1+json"
    assert answer.headers["docker-content-digest"] == "sha256:" + hashlib.sha256(body).hexdigest()
    assert int(answer.headers["content-length"]) == len(body)
    head = client.head(f"{MODULE}/manifests/1.0.0")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["docker-content-digest"] == answer.headers["docker-content-digest"]
    assert head.headers["content-length"] == answer.headers["content-length"]
    assert head.headers["content-type"] == answer.headers["content-type"]


def test_manifest_by_digest_is_the_same_bytes(registry: tuple[TestClient, Services]) -> None:
    client, _ = registry
    by_tag = client.get(f"{MODULE}/manifests/1.0.0")
    digest = by_tag.headers["docker-content-digest"]
    by_digest = client.get(f"{MODULE}/manifests/{digest}")
    assert by_digest.status_code == 200
    assert by_digest.content == by_tag.content
    assert "immutable" in by_digest.headers["cache-control"]


def test_module_layer_is_the_archive_tree_as_a_zip(registry: tuple[TestClient, Services]) -> None:
    client, svc = registry
    manifest = client.get(f"{MODULE}/manifests/1.0.0").json()
    [layer] = manifest["layers"]
    answer = client.get(f"{MODULE}/blobs/{layer['digest']}")
    assert answer.status_code == 200
    assert answer.headers["docker-content-digest"] == layer["digest"]
    assert "sha256:" + hashlib.sha256(answer.content).hexdigest() == layer["digest"]
    assert len(answer.content) == layer["size"]
    zipped = zipfile.ZipFile(io.BytesIO(answer.content))
    module = svc.index.find_module("open", "vpc", "aws")
    assert module is not None
    archive = svc.index.version_by_key(module.id, "1.0.0")
    assert archive is not None
    with svc.blobs.open(archive.archive_sha256) as raw, tarfile.open(fileobj=raw) as tar:
        tree = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    assert {n: zipped.read(n) for n in zipped.namelist() if not n.endswith("/")} == tree
    head = client.head(f"{MODULE}/blobs/{layer['digest']}")
    assert head.status_code == 200 and int(head.headers["content-length"]) == layer["size"]


def test_module_zip_is_built_once_and_recorded(registry: tuple[TestClient, Services]) -> None:
    client, svc = registry
    first = client.get(f"{MODULE}/manifests/1.0.0").json()["layers"][0]
    module = svc.index.find_module("open", "vpc", "aws")
    assert module is not None
    version = svc.index.version_by_key(module.id, "1.0.0")
    assert version is not None
    recorded = svc.oci.module_zip(version.archive_sha256)
    assert "sha256:" + recorded.zip_sha256 == first["digest"]
    svc.cache.invalidate()
    again = client.get(f"{MODULE}/manifests/1.0.0").json()["layers"][0]
    assert again == first


def test_config_blob_is_served(registry: tuple[TestClient, Services]) -> None:
    client, _ = registry
    config = client.get(f"{MODULE}/manifests/1.0.0").json()["config"]
    answer = client.get(f"{MODULE}/blobs/{config['digest']}")
    assert answer.status_code == 200 and answer.content == b"{}"
    index = client.get(f"{PROVIDER}/manifests/2.0.0").json()
    platform = client.get(f"{PROVIDER}/manifests/{index['manifests'][0]['digest']}").json()
    answer = client.get(f"{PROVIDER}/blobs/{platform['config']['digest']}")
    assert answer.json() == {"architecture": "arm64", "os": "darwin"}


def test_provider_layer_is_the_release_zip(registry: tuple[TestClient, Services]) -> None:
    client, svc = registry
    index = client.get(f"{PROVIDER}/manifests/2.0.0")
    assert index.headers["content-type"] == "application/vnd.oci.image.index.v1+json"
    platforms = {
        (m["platform"]["os"], m["platform"]["architecture"]): m["digest"]
        for m in index.json()["manifests"]
    }
    assert set(platforms) == {("darwin", "arm64"), ("linux", "amd64"), ("windows", "386")}
    [provider] = [p for p in svc.providers.providers() if p.provider.namespace == "open"]
    [version] = provider.versions
    for package in version.packages:
        manifest = client.get(f"{PROVIDER}/manifests/{platforms[(package.os, package.arch)]}")
        [layer] = manifest.json()["layers"]
        assert layer["digest"] == "sha256:" + package.sha256
        blob = client.get(f"{PROVIDER}/blobs/{layer['digest']}")
        assert hashlib.sha256(blob.content).hexdigest() == package.sha256


def test_tags_list_pages_with_n_and_last(registry: tuple[TestClient, Services]) -> None:
    client, _ = registry
    whole = client.get(f"{MODULE}/tags/list")
    assert whole.json() == {"name": "modules/open/vpc/aws", "tags": ["1.0.0", "1.1.0-rc.1"]}
    assert whole.headers["cache-control"] == "no-cache"
    first = client.get(f"{MODULE}/tags/list", params={"n": "1"})
    assert first.json()["tags"] == ["1.0.0"]
    assert first.headers["link"] == (
        '</v2/modules/open/vpc/aws/tags/list?n=1&last=1.0.0>; rel="next"'
    )
    second = client.get(f"{MODULE}/tags/list", params={"n": "1", "last": "1.0.0"})
    assert second.json()["tags"] == ["1.1.0-rc.1"]
    assert "link" not in second.headers
    assert client.get(f"{MODULE}/tags/list", params={"n": "0"}).json()["tags"] == []


@pytest.mark.parametrize("n", ["2", "1000", "1001", "99999999999", "9" * 5000, "0002", ""])
def test_tags_list_takes_any_page_size(registry: tuple[TestClient, Services], n: str) -> None:
    client, _ = registry
    answer = client.get(f"{MODULE}/tags/list?n={n}")
    assert answer.status_code == 200, answer.text
    assert answer.json()["tags"] == ["1.0.0", "1.1.0-rc.1"]
    assert "link" not in answer.headers


@pytest.mark.parametrize("n", ["-1", "abc", "1e3", "1.5", " 1", "%EF%BC%91", "%ff"])
def test_tags_list_refuses_a_page_size_that_is_no_number(
    registry: tuple[TestClient, Services], n: str
) -> None:
    client, _ = registry
    answer = client.get(f"{MODULE}/tags/list?n={n}")
    assert answer.status_code == 400
    assert _codes(answer) == ["PAGINATION_NUMBER_INVALID"]


def test_yanked_version_leaves_the_tags_but_stays_pullable(
    registry: tuple[TestClient, Services],
) -> None:
    from gitreg.addresses import module_address

    client, svc = registry
    svc.modules.set_yanked(module_address("open", "vpc", "aws"), "1.0.0", True)
    assert client.get(f"{MODULE}/tags/list").json()["tags"] == ["1.1.0-rc.1"]
    assert client.get(f"{MODULE}/manifests/1.0.0").status_code == 200


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        (f"{MODULE}/manifests/9.9.9", 404, "MANIFEST_UNKNOWN"),
        (f"{MODULE}/manifests/sha256:{'0' * 64}", 404, "MANIFEST_UNKNOWN"),
        (f"{MODULE}/blobs/sha256:{'0' * 64}", 404, "BLOB_UNKNOWN"),
        (f"{MODULE}/blobs/sha256:nothex", 400, "DIGEST_INVALID"),
        ("/v2/modules/open/nope/aws/manifests/1.0.0", 404, "NAME_UNKNOWN"),
        ("/v2/modules/open/nope/aws/tags/list", 404, "NAME_UNKNOWN"),
        ("/v2/elsewhere/x/manifests/1.0.0", 404, "NAME_UNKNOWN"),
        ("/v2/providers/open/nope/manifests/2.0.0", 404, "NAME_UNKNOWN"),
        (f"{PROVIDER}/manifests/3.0.0", 404, "MANIFEST_UNKNOWN"),
    ],
)
def test_errors_use_the_spec_codes(
    registry: tuple[TestClient, Services], path: str, status: int, code: str
) -> None:
    client, _ = registry
    answer = client.get(path)
    assert answer.status_code == status
    assert _codes(answer) == [code]
    assert set(answer.json()["errors"][0]) == {"code", "message", "detail"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", f"{MODULE}/blobs/uploads/"),
        ("PUT", f"{MODULE}/manifests/1.0.0"),
        ("DELETE", f"{MODULE}/manifests/1.0.0"),
        ("PATCH", f"{MODULE}/blobs/uploads/x"),
        ("PUT", f"{MODULE}/blobs/uploads/x?digest=sha256:{'0' * 64}"),
        ("DELETE", f"{PROVIDER}/blobs/sha256:{'0' * 64}"),
        ("POST", "/v2/"),
        ("OPTIONS", f"{MODULE}/manifests/1.0.0"),
        ("TRACE", f"{MODULE}/tags/list"),
        ("PROPFIND", f"{PROVIDER}/blobs/sha256:{'0' * 64}"),
        ("MKCOL", "/v2/"),
        ("OPTIONS", f"{MODULE}/referrers/sha256:{'0' * 64}"),
        ("COPY", "/v2/_catalog"),
    ],
)
def test_pushes_answer_405_with_an_error_body(
    registry: tuple[TestClient, Services], method: str, path: str
) -> None:
    client, _ = registry
    answer = client.request(method, path)
    assert answer.status_code == 405
    assert _codes(answer) == ["UNSUPPORTED"]
    assert answer.headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize("method", ["PUT", "DELETE", "OPTIONS", "PROPFIND"])
def test_the_token_endpoint_answers_other_methods_405(
    registry: tuple[TestClient, Services], method: str
) -> None:
    client, _ = registry
    answer = client.request(method, "/v2/token")
    assert answer.status_code == 405
    assert _codes(answer) == ["UNSUPPORTED"]
    assert answer.headers["allow"] == "GET, POST"


def test_referrers_answer_an_empty_index(registry: tuple[TestClient, Services]) -> None:
    client, _ = registry
    digest = client.get(f"{MODULE}/manifests/1.0.0").headers["docker-content-digest"]
    answer = client.get(f"{MODULE}/referrers/{digest}")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/vnd.oci.image.index.v1+json"
    assert answer.json() == {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [],
    }
    filtered = client.get(f"{MODULE}/referrers/{digest}", params={"artifactType": "x/y"})
    assert filtered.headers["oci-filters-applied"] == "artifactType"
    assert _codes(client.get(f"{MODULE}/referrers/latest")) == ["DIGEST_INVALID"]


def test_referrers_list_what_a_source_adds(registry: tuple[TestClient, Services]) -> None:
    from gitreg.oci.manifests import Document
    from gitreg.oci.names import RepoName

    client, svc = registry
    statement = Document("application/vnd.oci.image.manifest.v1+json", b"{}", "application/x")

    def source(repo: RepoName, digest: str) -> list[Document]:
        return [statement] if repo.parts == ("open", "vpc", "aws") else []

    svc.oci.add_referrers(source)
    digest = f"sha256:{'1' * 64}"
    [entry] = client.get(f"{MODULE}/referrers/{digest}").json()["manifests"]
    assert entry["artifactType"] == "application/x"
    assert entry["digest"] == statement.digest
    assert client.get(f"{PROVIDER}/referrers/{digest}").json()["manifests"] == []


def test_a_hosted_provider_is_also_named_with_the_registry_host(
    registry: tuple[TestClient, Services],
) -> None:
    """`repository_template = ".../providers/${hostname}/${namespace}/${type}"`
    finds gitreg's own providers under the host of `public_url`."""
    client, _ = registry
    own = client.get("/v2/providers/registry.example.com/open/null/manifests/2.0.0")
    assert own.status_code == 200
    assert own.content == client.get(f"{PROVIDER}/manifests/2.0.0").content
    assert client.get("/v2/providers/elsewhere.example/open/null/tags/list").status_code == 404


def test_concurrent_first_requests_build_the_zip_once(
    registry: tuple[TestClient, Services], monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    import time

    from gitreg.oci import service, zips

    _, svc = registry
    module = svc.index.find_module("open", "vpc", "aws")
    assert module is not None
    version = svc.index.version_by_key(module.id, "1.1.0-rc.1")
    assert version is not None
    builds: list[str] = []
    real = zips.tar_to_zip

    def slow(source: object, out: object) -> None:
        builds.append("build")
        time.sleep(0.2)
        real(source, out)  # type: ignore[arg-type]

    monkeypatch.setattr(service, "tar_to_zip", slow)
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(svc.oci.module_zip(version.archive_sha256)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert builds == ["build"]
    assert len({r.zip_sha256 for r in results}) == 1 and len(results) == 4


def test_a_layer_the_blob_store_lost_is_a_logged_503_not_unknown(
    registry: tuple[TestClient, Services], caplog: pytest.LogCaptureFixture
) -> None:
    client, svc = registry
    index = client.get(f"{PROVIDER}/manifests/2.0.0").json()
    platform = client.get(f"{PROVIDER}/manifests/{index['manifests'][0]['digest']}").json()
    digest = platform["layers"][0]["digest"]
    stored = svc.blobs.local_file(digest.removeprefix("sha256:"))
    assert stored is not None
    stored.unlink()
    for method in ("GET", "HEAD"):
        answer = client.request(method, f"{PROVIDER}/blobs/{digest}")
        assert answer.status_code == 503
        assert answer.headers["retry-after"].isdigit()
        assert answer.headers["docker-distribution-api-version"] == "registry/2.0"
        if method == "GET":
            assert _codes(answer) == ["UNAVAILABLE"]
            assert digest in answer.json()["errors"][0]["message"]
    logged = [r for r in caplog.records if r.name == "gitreg.oci"]
    assert [r.levelname for r in logged] == ["ERROR", "ERROR"]
    assert all("missing from the blob store" in r.getMessage() for r in logged)
    # A digest the repository does not name stays the client's error.
    unknown = client.get(f"{PROVIDER}/blobs/sha256:{'0' * 64}")
    assert unknown.status_code == 404 and _codes(unknown) == ["BLOB_UNKNOWN"]

"""Forge releases: GitHub and GitLab API shapes (httpx.MockTransport), origin-bound
credentials, and ingestion of complete, incomplete, replayed and changed releases."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from gitreg.errors import ConfigError, ForgeError, NotFound, ReleasePending
from gitreg.providers.forges import Asset, default_forge, forge_config, release_source
from gitreg.providers.ingest import ProviderPublisher
from gitreg.services import Services
from gitreg.settings import load_settings
from gitreg.storage.records import RepoRecord
from tests.support.provider_dist import (
    Dist,
    count_zip_entries_read,
    make_dist,
    make_services,
    public_armor,
    publisher_key,
    zip_of_directories,
)

API = "https://ghe.example.com/api/v3"
TOKEN = "ghp_secret"
REPO = "acme/terraform-provider-null"
BINARY = b"\x7fELF" * 500
Handler = Callable[[httpx.Request], httpx.Response]


class FakeReleases:
    """GitHub's releases API as an httpx transport; assets redirect to storage."""

    def __init__(self) -> None:
        self.releases: dict[str, dict[str, bytes]] = {}
        self.requests: list[httpx.Request] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if request.url.host == "objects.example.net":
            asset_id = int(path.rsplit("/", 1)[-1])
            return httpx.Response(200, content=self._asset(asset_id)[1])
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return httpx.Response(404, json={"message": "Not Found"})
        prefix = f"/api/v3/repos/{REPO}/releases"
        if path.startswith(prefix + "/tags/"):
            tag = path.rsplit("/", 1)[-1]
            if tag not in self.releases:
                return httpx.Response(404, json={"message": "Not Found"})
            return httpx.Response(200, json=self._json(tag))
        if path == prefix:
            return httpx.Response(200, json=[self._json(t) for t in reversed(self.releases)])
        if path.startswith(prefix + "/assets/"):
            asset_id = int(path.rsplit("/", 1)[-1])
            assert request.headers["accept"] == "application/octet-stream"
            return httpx.Response(
                302, headers={"location": f"https://objects.example.net/blob/{asset_id}"}
            )
        return httpx.Response(404, json={"message": "Not Found"})

    def _ids(self) -> list[tuple[int, str, str]]:
        return [
            (index, tag, name)
            for index, (tag, name) in enumerate(
                (t, n) for t, assets in self.releases.items() for n in assets
            )
        ]

    def _asset(self, asset_id: int) -> tuple[str, bytes]:
        for index, tag, name in self._ids():
            if index == asset_id:
                return name, self.releases[tag][name]
        raise AssertionError(asset_id)

    def _json(self, tag: str) -> dict[str, object]:
        assets = [
            {"id": i, "name": n, "size": len(self.releases[t][n]), "state": "uploaded"}
            for i, t, n in self._ids()
            if t == tag
        ]
        return {
            "tag_name": tag,
            "draft": False,
            "created_at": "2099-01-01T00:00:00Z",
            "assets": assets,
        }


@pytest.fixture
def fake() -> FakeReleases:
    return FakeReleases()


def _services(tmp_path: Path, settings: str = "") -> Services:
    data = tmp_path / "data"
    data.mkdir()
    (data / "gitreg.toml").write_text(
        settings + f'[forges.ghe]\nkind = "github"\napi_url = "{API}"\ntoken = "{TOKEN}"\n'
        'hosts = ["ghe.example.com"]\n'
    )
    services = make_services(data)
    services.provider_publisher.keys.add("acme", public_armor(publisher_key()))
    return services


@pytest.fixture
def svc(tmp_path: Path) -> Services:
    return _services(tmp_path)


def _publisher(svc: Services, fake: FakeReleases) -> ProviderPublisher:
    return ProviderPublisher(
        svc.settings,
        svc.provider_publisher.store,
        svc.blobs,
        transport=httpx.MockTransport(fake.handler),
    )


def _register(svc: Services, sign: bool = False) -> RepoRecord:
    repo = svc.index.add_repo("https://ghe.example.com/acme/terraform-provider-null.git", REPO)
    svc.provider_publisher.store.add_provider("acme", "null", repo.id, "ghe", sign)
    return repo


def _dist(version: str = "1.0.0", binary: bytes = BINARY) -> Dist:
    return make_dist("null", version, ["linux_amd64", "darwin_arm64"], binary, publisher_key())


def test_complete_release_is_published_and_token_stays_on_the_api_origin(
    svc: Services, fake: FakeReleases
) -> None:
    repo = _register(svc)
    fake.releases["v1.0.0"] = _dist().files
    result = _publisher(svc, fake).sync_repo(repo)
    assert [o.status for o in result.outcomes] == ["published"]
    assert svc.provider_publisher.store.provider_version(1, "1.0.0") is not None
    storage = [r for r in fake.requests if r.url.host == "objects.example.net"]
    assert storage and not any("authorization" in r.headers for r in storage)


@pytest.mark.parametrize(
    ("missing", "why"),
    [
        ("terraform-provider-null_1.0.0_SHA256SUMS", "SHA256SUMS asset"),
        ("terraform-provider-null_1.0.0_SHA256SUMS.sig", "SHA256SUMS.sig asset"),
        ("terraform-provider-null_1.0.0_darwin_arm64.zip", "darwin_arm64.zip"),
    ],
)
def test_incomplete_release_is_pending_and_retried(
    svc: Services, fake: FakeReleases, missing: str, why: str
) -> None:
    repo = _register(svc)
    files = _dist().files
    fake.releases["v1.0.0"] = {n: d for n, d in files.items() if n != missing}
    with pytest.raises(ReleasePending, match=why):
        _publisher(svc, fake).sync_repo(repo)
    # goreleaser finishes uploading; the retried job publishes.
    fake.releases["v1.0.0"] = files
    assert _publisher(svc, fake).sync_repo(repo).published


def test_tag_without_release_is_pending(svc: Services, fake: FakeReleases) -> None:
    repo = _register(svc)
    outcomes = _publisher(svc, fake).ingest_release(repo, "v1.0.0")
    assert [(o.status, o.message) for o in outcomes] == [("pending", "no release for this tag yet")]


def test_replayed_release_is_a_no_op_that_reads_only_checksums(
    svc: Services, fake: FakeReleases
) -> None:
    repo = _register(svc)
    fake.releases["v1.0.0"] = _dist().files
    publisher = _publisher(svc, fake)
    publisher.sync_repo(repo)
    fake.requests.clear()
    assert [o.status for o in publisher.ingest_release(repo, "v1.0.0")] == ["unchanged"]
    downloaded = [r for r in fake.requests if r.url.host == "objects.example.net"]
    assert len(downloaded) == 1  # SHA256SUMS only, no zips


def test_changed_release_is_a_conflict_and_keeps_the_published_bytes(
    svc: Services, fake: FakeReleases
) -> None:
    repo = _register(svc)
    fake.releases["v1.0.0"] = _dist().files
    publisher = _publisher(svc, fake)
    publisher.sync_repo(repo)
    before = svc.provider_publisher.store.packages(1)
    fake.releases["v1.0.0"] = _dist(binary=BINARY + b"rebuilt").files
    outcomes = publisher.ingest_release(repo, "v1.0.0")
    assert outcomes[0].status == "conflict" and "immutable" in outcomes[0].message
    assert svc.provider_publisher.store.packages(1) == before


def test_refused_release_is_reported_not_retried(svc: Services, fake: FakeReleases) -> None:
    repo = _register(svc)
    fake.releases["v1.0.0"] = make_dist(
        "null", "1.0.0", ["linux_amd64"], BINARY, publisher_key("rsa-other")
    ).files
    result = _publisher(svc, fake).sync_repo(repo)
    assert result.failed and "not registered" in result.failed[0]


def test_a_release_zip_with_more_entries_than_the_limit_is_refused(
    tmp_path: Path, fake: FakeReleases, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = _services(tmp_path, "max_provider_files = 5\n")
    repo = _register(svc)
    dist = _dist()
    dist.files[dist.zip_name("linux_amd64")] = zip_of_directories("null", "1.0.0", 200)
    dist.reshasum(publisher_key())
    fake.releases["v1.0.0"] = dist.files
    read = count_zip_entries_read(monkeypatch)
    result = _publisher(svc, fake).sync_repo(repo)
    assert result.failed and "more than 5 entries" in result.failed[0]
    assert len(read) <= 5  # the other platform's zip only
    assert svc.provider_publisher.store.provider_version(1, "1.0.0") is None


def test_unsigned_release_is_signed_when_registered_with_sign(
    svc: Services, fake: FakeReleases, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.provider_dist import reuse_generated_key

    reuse_generated_key(monkeypatch)
    key = svc.provider_publisher.keys.generate("acme")
    repo = _register(svc, sign=True)
    files = _dist().files
    fake.releases["v1.0.0"] = {n: d for n, d in files.items() if not n.endswith(".sig")}
    assert _publisher(svc, fake).sync_repo(repo).published
    version = svc.provider_publisher.store.provider_version(1, "1.0.0")
    assert version is not None and version.signed_by == "gitreg"
    assert svc.provider_publisher.store.key(version.key_row).key_id == key.key_id


def test_redirects_to_plain_http_or_link_local_are_refused(tmp_path: Path) -> None:
    settings = load_settings({"data_dir": tmp_path}, environ={})
    for target in ("http://objects.example.net/x", "https://169.254.169.254/latest"):

        def handler(request: httpx.Request, target: str = target) -> httpx.Response:
            if request.url.host == "api.github.com":
                return httpx.Response(302, headers={"location": target})
            return httpx.Response(200, content=b"metadata credentials")

        source = release_source(settings, "github", REPO, httpx.MockTransport(handler))
        asset = Asset("x.zip", 1, f"https://api.github.com/repos/{REPO}/releases/assets/1", True)
        with pytest.raises(ForgeError, match="refusing"):
            source.download(asset, io.BytesIO(), 1000)


def test_downloads_stop_at_the_byte_cap(tmp_path: Path) -> None:
    settings = load_settings({"data_dir": tmp_path}, environ={})
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=b"x" * 5000))
    source = release_source(settings, "github", REPO, transport)
    asset = Asset("x.zip", 1, f"https://api.github.com/repos/{REPO}/releases/assets/1", True)
    with pytest.raises(ForgeError, match="limit"):
        source.download(asset, io.BytesIO(), 1000)


def test_server_errors_are_retryable_forge_errors(tmp_path: Path) -> None:
    settings = load_settings({"data_dir": tmp_path}, environ={})
    transport = httpx.MockTransport(lambda request: httpx.Response(502, text="bad gateway"))
    source = release_source(settings, "github", REPO, transport)
    with pytest.raises(ForgeError, match="502"):
        source.release("v1.0.0")


def test_gitlab_release_links_and_origin_bound_token(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "gitreg.toml").write_text(
        '[forges.gitlab]\napi_url = "https://gitlab.example.com/api/v4"\ntoken = "glpat-x"\n'
    )
    settings = load_settings({"data_dir": data}, environ={})
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        # GitLab wants the project path URL-encoded as one path segment.
        project = "/api/v4/projects/group%2Fsub%2Fterraform-provider-null"
        if request.url.raw_path.decode() == project + "/releases/v1.0.0":
            return httpx.Response(
                200,
                json={
                    "tag_name": "v1.0.0",
                    "created_at": "2024-01-02T03:04:05.000Z",
                    "upcoming_release": False,
                    "assets": {
                        "count": 2,
                        "sources": [{"format": "zip", "url": "https://gitlab.example.com/x.zip"}],
                        "links": [
                            {
                                "id": 1,
                                "name": "terraform-provider-null_1.0.0_SHA256SUMS",
                                "url": "https://gitlab.example.com/group/sub/p/-/package_files/1",
                                "direct_asset_url": "https://gitlab.example.com/api/v4/projects/9/packages/generic/null/1.0.0/SHA256SUMS",
                                "link_type": "other",
                            },
                            {
                                "id": 2,
                                "name": "terraform-provider-null_1.0.0_linux_amd64.zip",
                                "url": "https://cdn.example.org/null_linux_amd64.zip",
                                "link_type": "package",
                            },
                        ],
                    },
                },
            )
        return httpx.Response(200, content=b"bytes")

    source = release_source(
        settings, "gitlab", "group/sub/terraform-provider-null", httpx.MockTransport(handler)
    )
    release = source.release("v1.0.0")
    assert release is not None and not release.draft
    assert [a.name for a in release.assets] == [
        "terraform-provider-null_1.0.0_SHA256SUMS",
        "terraform-provider-null_1.0.0_linux_amd64.zip",
    ]
    for asset in release.assets:
        source.download(asset, io.BytesIO(), 100)
    by_host = {r.url.host: "authorization" in r.headers for r in seen}
    assert by_host == {"gitlab.example.com": True, "cdn.example.org": False}


def test_forge_configuration(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "gitreg.toml").write_text(
        '[forges.ghe]\nkind = "github"\napi_url = "https://ghe.example.com/api/v3"\n'
        'token = "env:GHE_TOKEN"\nhosts = ["ghe.example.com"]\n'
    )
    settings = load_settings({"data_dir": data}, environ={})
    os.environ["GHE_TOKEN"] = "from-env"
    try:
        ghe = forge_config(settings, "ghe")
    finally:
        del os.environ["GHE_TOKEN"]
    assert (ghe.kind, ghe.api_url, ghe.token) == (
        "github",
        "https://ghe.example.com/api/v3",
        "from-env",
    )
    assert "from-env" not in repr(ghe)
    assert forge_config(settings, "github").api_url == "https://api.github.com"
    assert forge_config(settings, "gitlab").api_url == "https://gitlab.com/api/v4"
    assert default_forge(settings, "git@ghe.example.com:acme/x.git") == "ghe"
    assert default_forge(settings, "https://github.com/acme/terraform-provider-x") == "github"
    assert default_forge(settings, "/srv/git/x.git") == ""
    with pytest.raises(NotFound, match="no forge named 'nope'"):
        forge_config(settings, "nope")
    # A bad table stops the load, before any forge is asked.
    for table, message in [
        ('[forges.bad]\nkind = "github"\napi_url = "http://plain.example.com"\n', "https"),
        ('[forges.odd]\nkind = "svn"\n', "kind"),
    ]:
        (data / "gitreg.toml").write_text(table)
        with pytest.raises(ConfigError, match=message):
            load_settings({"data_dir": data}, environ={})

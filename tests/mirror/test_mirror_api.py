"""The mirror's HTTP surface in-process (httpx.ASGITransport over gitreg's app),
pulling through a fake upstream served over real TLS."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitreg.app import create_app
from gitreg.auth.tokens import new_token, token_hash
from gitreg.services import Services, build_services
from gitreg.settings import load_settings
from gitreg.storage.index import SQLiteIndex
from tests.mirror.test_mirror_cache import expected_h1
from tests.support.fake_upstream import FakeUpstream, ServedUpstream, serve_tls
from tests.support.provider_dist import make_dist
from tests.support.server import cli

BASE = "/mirror/registry.terraform.io/hashicorp/null"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedUpstream]:
    fake = FakeUpstream()
    fake.add("hashicorp", "null", ["2.1.2", "3.0.0"])
    with serve_tls(fake, tmp_path_factory.mktemp("upstream-tls")) as running:
        yield running


@pytest.fixture
def svc(
    tmp_path: Path, served: ServedUpstream, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Services]:
    monkeypatch.setenv("SSL_CERT_FILE", str(served.ca_pem))
    served.upstream.faults.clear()
    served.upstream.requests.clear()
    settings = load_settings(
        {
            "data_dir": tmp_path / "data",
            "upstream": f"registry.terraform.io={served.url}",
            "mirror_platforms": "linux_amd64",
            "public_url": "https://registry.example.com",
            "job_workers": 0,
        },
        environ={},
    )
    services = build_services(settings)
    yield services
    services.close()
    served.upstream.faults.clear()


def get(svc: Services, *paths: str, **kwargs: Any) -> list[httpx.Response]:
    """GET each path in order through the app, in one event loop."""

    async def go() -> list[httpx.Response]:
        app = create_app(svc.settings, svc)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://mirror.test") as c:
            try:
                return [
                    await c.request(kwargs.get("method", "GET"), p, headers=kwargs.get("headers"))
                    for p in paths
                ]
            finally:
                await svc.mirror.settled()  # fills a cold answer left running
                await svc.mirror.aclose()

    return asyncio.run(go())


def test_index_lists_upstream_versions_as_json(svc: Services) -> None:
    (answer,) = get(svc, f"{BASE}/index.json")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {"versions": {"2.1.2": {}, "3.0.0": {}}}
    (again,) = get(svc, f"{BASE}/index.json", headers={"If-None-Match": answer.headers["etag"]})
    assert again.status_code == 304


def test_version_json_and_zip_as_terraform_fetches_them(
    svc: Services, served: ServedUpstream
) -> None:
    (version,) = get(svc, f"{BASE}/2.1.2.json")
    assert version.status_code == 200
    assert version.headers["content-type"] == "application/json"
    archive = version.json()["archives"]["linux_amd64"]
    # Cold: the zip's sha256 from the signed SHA256SUMS, before the zip is here.
    (zh,) = archive["hashes"]
    # The url resolves against VERSION.json's own URL, as Terraform resolves it.
    url = httpx.URL(f"https://mirror.test{BASE}/2.1.2.json").join(archive["url"])
    (body,) = get(svc, url.path)
    data = served.upstream.providers[("hashicorp", "null")]["2.1.2"].zips["linux_amd64"]
    assert body.content == data
    assert zh == "zh:" + hashlib.sha256(data).hexdigest()
    # Warm: the stored package's h1: as well.
    (warm,) = get(svc, f"{BASE}/2.1.2.json")
    assert warm.json()["archives"]["linux_amd64"]["hashes"] == [expected_h1(data), zh]
    assert body.headers["content-type"] == "application/zip"
    assert "immutable" in body.headers["cache-control"]
    (headed,) = get(svc, url.path, method="HEAD")
    assert int(headed.headers["content-length"]) == len(data)


def test_warm_hits_do_not_touch_upstream_or_write(svc: Services, served: ServedUpstream) -> None:
    paths = [
        f"{BASE}/index.json",
        f"{BASE}/2.1.2.json",
        f"{BASE}/terraform-provider-null_2.1.2_linux_amd64.zip",
    ]
    get(svc, *paths)
    requests = len(served.upstream.requests)
    assert isinstance(svc.index, SQLiteIndex)  # the fixture's settings: the embedded index
    changes = svc.index._conn.total_changes
    answers = get(svc, *(paths * 5))
    assert [a.status_code for a in answers] == [200] * 15
    assert len(served.upstream.requests) == requests
    assert svc.index._conn.total_changes == changes


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/mirror/bad_host!/hashicorp/null/index.json", 400, "hostname"),
        ("/mirror/registry.terraform.io/-bad/null/index.json", 400, "namespace"),
        ("/mirror/registry.terraform.io/hashicorp/nu_ll/index.json", 400, "type"),
        (f"{BASE}/not-a-version.json", 404, "no version"),
        (f"{BASE}/9.9.9.json", 404, "no version 9.9.9"),
        (f"{BASE}/README.txt", 404, "no such mirror file"),
        (f"{BASE}/terraform-provider-null_2.1.2.zip", 404, "no such file"),
        (f"{BASE}/terraform-provider-other_2.1.2_linux_amd64.zip", 404, "no such file"),
        ("/mirror/registry.terraform.io/hashicorp/missing/index.json", 404, "not found upstream"),
        ("/mirror/example.com/acme/thing/index.json", 404, "not mirrored here"),
        ("/mirror/registry.example.com/acme/thing/index.json", 404, "not found"),
    ],
)
def test_bad_requests_are_json_4xx(svc: Services, path: str, status: int, message: str) -> None:
    (answer,) = get(svc, path)
    assert answer.status_code == status
    assert answer.headers["content-type"] == "application/json"
    assert message in answer.json()["errors"][0]


def test_uncached_package_with_upstream_down_is_502_json(
    svc: Services, served: ServedUpstream
) -> None:
    get(svc, f"{BASE}/index.json")
    served.upstream.faults["*"] = "down"
    svc.mirror._fresh.clear()
    index, version = get(svc, f"{BASE}/index.json", f"{BASE}/3.0.0.json")
    assert index.status_code == 200  # stale-if-error
    assert version.status_code == 502
    assert "503" in version.json()["errors"][0]


def test_refused_package_is_502_naming_the_reason(svc: Services, served: ServedUpstream) -> None:
    served.upstream.faults["3.0.0"] = "bad-signature"
    (answer,) = get(svc, f"{BASE}/3.0.0.json")
    assert answer.status_code == 502
    assert "signature does not verify" in answer.json()["errors"][0]


@pytest.mark.slow
def test_own_providers_appear_under_gitregs_hostname(svc: Services, tmp_path: Path) -> None:
    data_dir = svc.settings.data_dir
    dist = make_dist("cloud", "1.4.0", ["linux_amd64", "darwin_arm64"], b"binary")
    cli(data_dir, "key", "generate", "acme")
    cli(
        data_dir,
        "provider",
        "publish",
        "acme/cloud",
        "1.4.0",
        str(dist.write(tmp_path / "dist")),
        "--sign",
    )
    base = "/mirror/registry.example.com/acme/cloud"
    index, version = get(svc, f"{base}/index.json", f"{base}/1.4.0.json")
    assert index.json() == {"versions": {"1.4.0": {}}}
    archives = version.json()["archives"]
    assert set(archives) == {"linux_amd64", "darwin_arm64"}
    (zip_answer,) = get(svc, f"{base}/{archives['darwin_arm64']['url']}")
    expected = dist.files[dist.zip_name("darwin_arm64")]
    assert zip_answer.content == expected
    assert archives["darwin_arm64"]["hashes"][1] == "zh:" + hashlib.sha256(expected).hexdigest()
    listing = json.loads(cli(data_dir, "providers", "--json").stdout)
    assert archives["darwin_arm64"]["hashes"][0] in json.dumps(listing)


def test_locked_down_registry_needs_a_read_token_for_mirrored_providers(
    svc: Services, tmp_path: Path
) -> None:
    settings = dataclasses.replace(svc.settings, read_default="token")
    locked = build_services(settings)
    try:
        (anonymous,) = get(locked, f"{BASE}/index.json")
        assert anonymous.status_code == 401
        token = new_token()
        locked.auth.add_token(token_hash(token), token[:12], "read", [], "", None)
        locked.cache.invalidate()
        headers = {"authorization": f"Bearer {token}"}
        (index,) = get(locked, f"{BASE}/index.json", headers=headers)
        assert index.status_code == 200
        locked.auth.set_namespace_private("hashicorp", False)
        locked.cache.invalidate()
        (opened,) = get(locked, f"{BASE}/index.json")
        assert opened.status_code == 200
    finally:
        locked.close()


PART = st.text(st.characters(codec="utf-8", exclude_characters="/"), min_size=1, max_size=40)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    hostname=st.one_of(st.just("registry.terraform.io"), st.just("example.com"), PART),
    namespace=PART,
    type_=PART,
    name=st.one_of(PART, PART.map(lambda t: t + ".json"), PART.map(lambda t: t + ".zip")),
)
def test_arbitrary_paths_never_give_a_5xx(
    svc: Services, hostname: str, namespace: str, type_: str, name: str
) -> None:
    parts = [quote(p, safe="") for p in (hostname, namespace, type_, name)]
    (answer,) = get(svc, "/mirror/" + "/".join(parts))
    assert answer.status_code < 500, answer.text
    assert answer.headers["content-type"] == "application/json"

"""The browse/search API in the public registry's v1 shape, and private
namespaces never leaking through it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.auth.tokens import new_token, token_hash
from gitreg.cache import entry_bytes
from gitreg.catalog.search_cache import SEARCH_CANDIDATES
from gitreg.catalog.store import SearchEntry
from gitreg.services import Services
from gitreg.settings import load_settings
from gitreg.storage.bulk import BulkLoader, BulkModule, BulkVersion
from gitreg.storage.index import Index
from tests.catalog.test_extraction import full_module
from tests.support.gitrepo import GitRepo, simple_module

BASE = "https://registry.example.com"
SHORT_FIELDS = {
    "id",
    "owner",
    "namespace",
    "name",
    "version",
    "provider",
    "description",
    "source",
    "published_at",
    "downloads",
    "verified",
}
ROOT_FIELDS = {
    "path",
    "readme",
    "empty",
    "inputs",
    "outputs",
    "dependencies",
    "provider_dependencies",
    "resources",
}
# Every list and search route, with what a caller without access must never see.
LIST_ROUTES = [
    "/v1/modules",
    "/v1/modules?limit=100",
    "/v1/modules/search?q=vpc",
    "/v1/modules/search?q=greeting",
    "/v1/modules?q=secret",
    "/v1/modules/secret",
    "/v1/modules/secret/vpc",
    "/v1/modules?provider=aws",
]
PAGE_ROUTES = [
    "/v1/modules/secret/vpc/aws",
    "/v1/modules/secret/vpc/aws/1.0.0",
    "/v1/modules/secret/vpc/aws/download",
    "/v1/modules/secret/nope/aws",
]


@pytest.fixture
def app_client(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> Iterator[tuple[TestClient, Services]]:
    # No job threads: the modules are published here, and a reconcile of the
    # thousand repositories one test adds would outlive the test.
    settings = load_settings(
        {"data_dir": tmp_path / "data", "public_url": BASE, "job_workers": 0}, environ={}
    )
    app = create_app(settings)
    svc: Services = app.state.services
    for namespace, name, system in [
        ("acme", "vpc", "aws"),
        ("acme", "vpc", "google"),
        ("acme", "network", "aws"),
        ("secret", "vpc", "aws"),
    ]:
        repo = make_repo(f"{namespace}-{name}-{system}")
        if namespace == "acme" and name == "vpc" and system == "aws":
            full_module(repo)
        else:
            simple_module(repo, f"hidden_{namespace}")
        repo.commit()
        repo.tag("v1.0.0")
        if system == "aws":
            repo.write("extra.tf", "# 1.1.0\n")
            repo.commit()
            repo.tag("v1.1.0")
        record = svc.index.add_repo(str(repo.path), "")
        svc.index.add_module(record.id, namespace, name, system, "", "")
        svc.publisher.sync_repo(record)
    svc.auth.set_namespace_private("secret", True)
    svc.cache.invalidate()
    with TestClient(app, base_url="https://testserver", follow_redirects=False) as client:
        yield client, svc


def _token(svc: Services, namespaces: list[str]) -> dict[str, str]:
    token = new_token()
    svc.auth.add_token(token_hash(token), token[:12], "read", namespaces, "", None)
    svc.cache.invalidate()
    return {"authorization": f"Bearer {token}"}


def test_list_has_the_public_shape_and_pages(app_client: tuple[TestClient, Services]) -> None:
    client, _ = app_client
    first = client.get("/v1/modules?limit=2").json()
    assert first["meta"] == {
        "limit": 2,
        "current_offset": 0,
        "next_offset": 2,
        "next_url": "/v1/modules?limit=2&offset=2",
    }
    assert [m["id"] for m in first["modules"]] == ["acme/network/aws/1.1.0", "acme/vpc/aws/1.1.0"]
    assert all(set(m) >= SHORT_FIELDS for m in first["modules"])
    second = client.get(first["meta"]["next_url"]).json()
    assert [m["id"] for m in second["modules"]] == ["acme/vpc/google/1.0.0"]
    assert second["meta"] == {"limit": 2, "current_offset": 2, "prev_offset": 0}
    only_google = client.get("/v1/modules?provider=google").json()["modules"]
    assert [m["provider"] for m in only_google] == ["google"]
    assert client.get("/v1/modules?verified=true").json()["modules"] == []
    for bad in ("x", "-1", "²", "1" * 5000):  # "²".isdigit(); int() takes neither
        assert client.get(f"/v1/modules?offset={bad}").status_code == 400, bad


def test_one_version_has_every_documented_field(app_client: tuple[TestClient, Services]) -> None:
    client, _ = app_client
    record = client.get("/v1/modules/acme/vpc/aws/1.1.0").json()
    assert set(record) >= SHORT_FIELDS | {"root", "submodules", "examples", "providers", "versions"}
    assert set(record["root"]) >= ROOT_FIELDS
    assert record["versions"] == ["1.1.0", "1.0.0"] and record["providers"] == ["aws"]
    assert record["description"] == "A VPC for the platform team."
    assert {i["name"] for i in record["root"]["inputs"]} == {"name", "cidr", "token"}
    assert [s["path"] for s in record["submodules"]] == ["modules/subnets"]
    latest = client.get("/v1/modules/acme/vpc/aws").json()
    assert latest["version"] == "1.1.0"
    assert client.get("/v1/modules/acme/vpc/aws/1.0.0").json()["version"] == "1.0.0"
    assert client.get("/v1/modules/acme/vpc/aws/9.9.9").status_code == 404
    systems = client.get("/v1/modules/acme/vpc").json()["modules"]
    assert [m["provider"] for m in systems] == ["aws", "google"]
    namespace = client.get("/v1/modules/acme").json()["modules"]
    assert [m["name"] for m in namespace] == ["network", "vpc", "vpc"]


def test_download_redirects_to_the_latest_version(app_client: tuple[TestClient, Services]) -> None:
    client, _ = app_client
    answer = client.get("/v1/modules/acme/vpc/aws/download")
    assert answer.status_code == 302
    assert answer.headers["location"] == f"{BASE}/v1/modules/acme/vpc/aws/1.1.0/download"
    assert client.get("/v1/modules/acme/none/aws/download").status_code == 404


@pytest.mark.parametrize(
    "route",
    [
        "/v1/modules/acme/vpc/aws/not-a-version",
        "/v1/modules/acme/vpc/aws/not-a-version/download",
        "/v1/modules/secret/vpc/aws/not-a-version",  # before the access check, as downloads
        "/v1/modules/secret/vpc/aws/not-a-version/download",
        "/v1/providers/acme/nothing/not-a-version",
        "/v1/providers/acme/nothing/not-a-version/download/linux/amd64",
    ],
)
def test_a_path_part_that_is_no_version_is_400_on_every_route(
    app_client: tuple[TestClient, Services], route: str
) -> None:
    client, _ = app_client
    answer = client.get(route)
    assert answer.status_code == 400, answer.text
    (error,) = answer.json()["errors"]
    assert "'not-a-version' is not a" in error


def test_search_ranks_the_exact_name_first(app_client: tuple[TestClient, Services]) -> None:
    client, _ = app_client
    found = client.get("/v1/modules/search?q=vpc").json()["modules"]
    assert [m["name"] for m in found][:2] == ["vpc", "vpc"]
    by_input = client.get("/v1/modules/search?q=cidr").json()["modules"]
    assert [m["id"] for m in by_input] == ["acme/vpc/aws/1.1.0"]
    assert client.get("/v1/modules/search?q=").status_code == 400


def test_the_existing_protocol_routes_still_answer(
    app_client: tuple[TestClient, Services],
) -> None:
    client, _ = app_client
    assert client.get("/v1/modules/acme/vpc/aws/versions").json()["modules"][0]["versions"]
    assert client.get("/v1/modules/acme/vpc/aws/1.1.0/download").status_code == 204


@pytest.mark.parametrize("route", LIST_ROUTES)
def test_lists_and_search_never_show_a_private_namespace(
    app_client: tuple[TestClient, Services], route: str
) -> None:
    client, svc = app_client
    for headers in ({}, _token(svc, ["acme"])):
        answer = client.get(route, headers=headers)
        assert answer.status_code == 200, answer.text
        assert "secret" not in str(answer.json()["modules"])
        assert "hidden_secret" not in answer.text
    allowed = client.get(route, headers=_token(svc, ["secret"]))
    if route.startswith("/v1/modules/secret") or "q=greeting" in route:
        assert "secret/vpc/aws" in allowed.text


@pytest.mark.parametrize("route", PAGE_ROUTES)
def test_private_pages_need_a_token_and_say_nothing_more(
    app_client: tuple[TestClient, Services], route: str
) -> None:
    client, svc = app_client
    anonymous = client.get(route)
    assert anonymous.status_code == 401
    assert "hidden_secret" not in anonymous.text and "1.1.0" not in anonymous.text
    other = client.get(route, headers=_token(svc, ["acme"]))
    assert other.status_code == 404
    assert "hidden_secret" not in other.text and "1.1.0" not in other.text


def test_unknown_providers_are_404(app_client: tuple[TestClient, Services]) -> None:
    client, _ = app_client
    answer = client.get("/v1/providers/acme/nothing")
    assert answer.status_code == 404
    assert answer.json() == {"errors": ["provider acme/nothing not found"]}
    assert client.get("/v1/providers/secret/nothing").status_code == 401


def test_a_cached_module_page_is_sized_by_its_record(
    app_client: tuple[TestClient, Services],
) -> None:
    # The metadata cache's byte bound must see a README-sized record, or a
    # crawler reading every version keeps thousands of them in one worker.
    client, svc = app_client
    answer = client.get("/v1/modules/acme/vpc/aws")
    assert answer.status_code == 200
    cached = svc.cache.peek(("browse-module", "acme", "vpc", "aws", None))
    assert entry_bytes(cached) >= len(answer.content)


def test_a_head_of_a_download_is_not_counted(app_client: tuple[TestClient, Services]) -> None:
    client, svc = app_client
    path = "/v1/modules/acme/vpc/aws/1.0.0/download"
    assert client.head(path).status_code == 204
    assert svc.downloads.take() == {}
    assert client.get(path).status_code == 204
    assert list(svc.downloads.take().values()) == [1]


@pytest.mark.slow
def test_private_matches_ranking_first_leave_public_ones_in_the_results(
    app_client: tuple[TestClient, Services], tmp_path: Path
) -> None:
    """More private matches than the candidates search ranks (1,000), all above
    the public ones: an anonymous reader still gets every public match, and
    neither the results, their order nor `meta` changes with the private ones."""
    client, svc = app_client
    route = "/v1/modules/search?q=greeting&limit=100"
    before = client.get(route).json()
    public = {"acme/network/aws/1.1.0", "acme/vpc/google/1.0.0"}
    assert {m["id"] for m in before["modules"]} == public
    count = SEARCH_CANDIDATES + 1
    version = BulkVersion("1.0.0", "c" * 40, "e" * 40, "a" * 64, 100)
    modules = [
        BulkModule(str(tmp_path / f"gone-{n}"), "secret", f"greeting-{n}", "aws", [version])
        for n in range(count)
    ]
    assert isinstance(svc.index, Index)  # open_index's, as BulkLoader needs
    BulkLoader(svc.index).add_modules(modules)
    for module in svc.index.modules():
        if module.namespace == "secret" and module.name.startswith("greeting-"):
            entry = SearchEntry(module.id, "secret", module.name, "aws", "Greeting greeting", "")
            svc.catalog_index.put_search(entry)
    svc.cache.invalidate()
    assert client.get(route).json() == before
    assert client.get(route, headers=_token(svc, ["acme"])).json() == before
    allowed = client.get(route, headers=_token(svc, ["secret"])).json()
    assert all(m["namespace"] == "secret" for m in allowed["modules"])
    assert allowed["meta"]["next_offset"] == 100

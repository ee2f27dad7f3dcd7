"""Provider documentation: the release's docs/ pages, read from the
repository at the release tag when a forge release is published, rendered
safely, bounded, stored with the version, back-filled by `gitreg reindex`,
and served by `/v1/providers/NS/TYPE/VERSION/docs/ID` with the access rules
of the other provider routes."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.auth.tokens import new_token, token_hash
from gitreg.cache import entry_bytes
from gitreg.catalog import provider_tree
from gitreg.catalog.cli import reindex
from gitreg.catalog.provider_docs import (
    ProviderDocumenter,
    Release,
    build_pages,
    front_matter,
    slug_of,
    tag_of,
)
from gitreg.catalog.records import provider_doc
from gitreg.git.backend import DulwichBackend
from gitreg.providers.ingest import ProviderPublisher
from gitreg.services import Services
from tests.providers.test_providers_forges import API, REPO, TOKEN, FakeReleases, _dist
from tests.support.gitrepo import GitRepo
from tests.support.provider_dist import make_services, public_armor, publisher_key

BASE = "https://registry.example.com"
INDEX = '---\npage_title: "Provider: Null"\nsubcategory: ""\n---\n# Null\n\nThe null provider.\n'
RESOURCE = (
    "---\nsubcategory: Utility\npage_title: 'null_resource'\n---\n"
    "# null_resource\n\n<script>alert(1)</script>\n\n"
    "[bad](javascript:alert(1)) [guide](../guides/start.md)\n"
)


def _repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "terraform-provider-null")
    repo.write("main.go", "package main\n")
    repo.write("docs/index.md", INDEX)
    repo.write("docs/resources/resource.md", RESOURCE)
    repo.write("docs/data-sources/data_source.md", "# data\n")
    repo.write("docs/guides/start.md", "---\npage_title: Getting started\n---\nHello\n")
    repo.write("docs/notes.txt", "not a page\n")
    repo.write("website/docs/r/old.html.markdown", "# ignored: docs/ exists\n")
    repo.commit()
    repo.tag("v1.0.0")
    return repo


@pytest.fixture
def svc(tmp_path: Path) -> Services:
    data = tmp_path / "data"
    data.mkdir()
    (data / "gitreg.toml").write_text(
        f'[forges.ghe]\nkind = "github"\napi_url = "{API}"\ntoken = "{TOKEN}"\n'
    )
    services = make_services(data, public_url=BASE)
    services.provider_publisher.keys.add("acme", public_armor(publisher_key()))
    return services


def _ingest(svc: Services, tmp_path: Path, documented: bool = True) -> None:
    git = _repo(tmp_path)
    repo = svc.index.add_repo(str(git.path), REPO)
    svc.provider_publisher.store.add_provider("acme", "null", repo.id, "ghe", False)
    fake = FakeReleases()
    fake.releases["v1.0.0"] = _dist().files
    documenter = ProviderDocumenter(
        svc.provider_publisher.store,
        svc.provider_docs,
        DulwichBackend(svc.settings.git_timeout, svc.settings.max_fetch_bytes),
        svc.publisher.fetch_mirror,
        svc.cache.invalidate,
    )
    publisher = ProviderPublisher(
        svc.settings,
        svc.provider_publisher.store,
        svc.blobs,
        transport=httpx.MockTransport(fake.handler),
        documenter=documenter if documented else None,
    )
    assert publisher.sync_repo(repo).published


def _token(svc: Services, namespaces: list[str]) -> dict[str, str]:
    token = new_token()
    svc.auth.add_token(token_hash(token), token[:12], "read", namespaces, "", None)
    return {"authorization": f"Bearer {token}"}


def test_front_matter_slugs_and_tags() -> None:
    fields, body = front_matter(INDEX)
    assert fields == {"page_title": "Provider: Null", "subcategory": ""}
    assert body.startswith("# Null")
    assert front_matter("# no front matter\n") == ({}, "# no front matter\n")
    assert slug_of("website/docs/r/instance.html.markdown") == "instance"
    assert slug_of("docs/resources/we ird<x>.md") == "we_ird_x_"
    assert tag_of("ghe:acme/terraform-provider-null@v1.2.0") == "v1.2.0"
    assert tag_of("cli") == "" and tag_of("upload") == ""


def test_pages_are_sanitised_and_links_resolved() -> None:
    problems: list[str] = []
    files = [("docs/resources/resource.md", "resources", RESOURCE.encode())]
    release = Release("https://github.com/acme/terraform-provider-null.git", "c0ffee")
    entries, pages = build_pages(files, release, problems)
    assert entries == [
        {
            "id": "resources-resource",
            "title": "resource",
            "path": "docs/resources/resource.md",
            "slug": "resource",
            "category": "resources",
            "subcategory": "Utility",
            "language": "hcl",
        }
    ]
    html = pages[0].html
    assert "<script" not in html and "alert" not in html.replace("javascript:alert(1)", "")
    assert "javascript:" not in html.replace("[bad](javascript:alert(1))", "")
    assert 'href="javascript' not in html
    assert (
        "https://github.com/acme/terraform-provider-null/blob/c0ffee/docs/guides/start.md" in html
    )
    assert "page_title" not in html and problems == []


def test_a_hostile_release_is_bounded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "hostile")
    for number in range(5):
        repo.write(f"docs/resources/r{number}.md", f"# r{number}\n")
    repo.write("docs/resources/huge.md", "x" * 5000)
    repo.commit()
    monkeypatch.setattr(provider_tree, "MAX_DOCS", 3)
    monkeypatch.setattr(provider_tree, "MAX_DOC_BYTES", 1000)
    from dulwich.repo import Repo

    with Repo(str(repo.path)) as opened:
        tree = opened[opened.head()].tree.decode()  # type: ignore[attr-defined]
        files, notes = provider_tree.read_provider_docs(opened.object_store, tree)
    assert [path for path, _, _ in files] == [f"docs/resources/r{n}.md" for n in range(3)]
    assert any("huge.md: left out, larger than 1000 bytes" in n for n in notes)
    assert sum("more than 3 pages" in n for n in notes) == 1


def test_rendered_pages_are_bounded_per_page_and_per_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gitreg.catalog import provider_docs

    monkeypatch.setattr(provider_docs, "MAX_HTML_BYTES", 200)
    monkeypatch.setattr(provider_docs, "MAX_RELEASE_HTML_BYTES", 100)
    files = [
        ("docs/resources/big.md", "resources", b"*a* " * 100),
        ("docs/resources/a.md", "resources", b"# a\n"),
        ("docs/resources/b.md", "resources", b"x" * 90),
        ("docs/resources/c.md", "resources", b"# c\n"),
    ]
    problems: list[str] = []
    entries, _ = build_pages(files, Release("/srv/git/p", "c0ffee"), problems)
    assert [e["slug"] for e in entries] == ["a"]
    assert problems == [
        "docs/resources/big.md: left out, its HTML is larger than 200 bytes",
        "docs/resources/b.md and later pages: left out, over 100 bytes",
    ]


def test_ingest_stores_pages_and_the_api_serves_them(svc: Services, tmp_path: Path) -> None:
    _ingest(svc, tmp_path)
    with TestClient(create_app(svc.settings, svc), base_url=BASE) as client:
        answer = client.get("/v1/providers/acme/null/1.0.0")
        # Serialised once in the cache's loader, not per request on the event loop.
        cached = svc.cache.peek(("browse-provider", "acme", "null", "1.0.0"))
        assert getattr(cached, "body", None) == answer.content
        record = answer.json()
        assert [d["id"] for d in record["docs"]] == [
            "overview-index",
            "resources-resource",
            "data-sources-data_source",
            "guides-start",
        ]
        assert record["docs"][0]["title"] == "Provider: Null"
        assert record["docs"][3]["title"] == "Getting started"
        assert record["problems"] == []
        page = client.get("/v1/providers/acme/null/1.0.0/docs/resources-resource")
        assert page.status_code == 200, page.text
        body = page.json()
        assert set(body) == {
            "id",
            "title",
            "path",
            "category",
            "slug",
            "subcategory",
            "content_html",
        }
        assert body["subcategory"] == "Utility" and "<script" not in body["content_html"]
        # Cached serialised: not encoded again per request, and the cache's
        # byte bound sees the page's size, not that of a small dict.
        key = ("browse-provider-doc", "acme", "null", "1.0.0", "resources-resource")
        cached = svc.cache.peek(key)
        assert getattr(cached, "body", None) == page.content
        assert entry_bytes(cached) >= len(page.content)
        missing = client.get("/v1/providers/acme/null/1.0.0/docs/resources-nope")
        assert missing.status_code == 404
        assert missing.json() == {
            "errors": ["provider acme/null 1.0.0 has no documentation page resources-nope"]
        }


def test_a_doc_page_reads_only_its_own_version_listing(
    svc: Services, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not every version's listing (megabytes of JSON for a large provider),
    parsed again for every page asked for, in the API and the UI alike."""
    _ingest(svc, tmp_path)

    def every_listing(provider_id: int) -> dict[int, str]:
        raise AssertionError("a doc page read every version's listing")

    monkeypatch.setattr(svc.provider_docs, "provider_docs", every_listing)
    found = provider_doc(
        svc.provider_publisher.store, svc.provider_docs, "acme", "null", "1.0.0", "guides-start"
    )
    assert found is not None and found["title"] == "Getting started"
    assert "Hello" in found["html"]
    assert (
        provider_doc(
            svc.provider_publisher.store, svc.provider_docs, "acme", "null", "1.0.0", "guides-nope"
        )
        is None
    )


def test_private_provider_docs_follow_the_provider_routes(svc: Services, tmp_path: Path) -> None:
    _ingest(svc, tmp_path)
    svc.auth.set_namespace_private("acme", True)
    route = "/v1/providers/acme/null/1.0.0/docs/overview-index"
    others, readers = _token(svc, ["other"]), _token(svc, ["acme"])
    with TestClient(create_app(svc.settings, svc), base_url=BASE) as client:
        assert client.get(route).status_code == 401
        other = client.get(route, headers=others)
        assert other.status_code == 404 and "Null" not in other.text
        allowed = client.get(route, headers=readers)
        assert allowed.status_code == 200 and "null provider" in allowed.json()["content_html"]


def test_reindex_back_fills_provider_docs(svc: Services, tmp_path: Path) -> None:
    _ingest(svc, tmp_path, documented=False)
    version = svc.provider_publisher.store.provider_version(1, "1.0.0")
    assert version is not None and svc.provider_docs.provider_docs(1) == {}
    out = io.StringIO()
    assert reindex(svc, out) == 0
    assert "provider acme/null 1.0.0" in out.getvalue()
    assert svc.provider_docs.provider_doc_page(version.id, "guides-start") is not None
    out = io.StringIO()
    assert reindex(svc, out) == 0 and "provider" not in out.getvalue()  # nothing left


def test_a_provider_release_is_chosen_by_version_yanked_ones_by_exact_version_only(
    svc: Services, tmp_path: Path
) -> None:
    _ingest(svc, tmp_path)
    catalog = svc.catalog
    latest = catalog.provider_release("ACME", "Null", None)
    assert latest is not None and latest.body["version"] == "1.0.0"
    assert latest.body["namespace"] == "acme" and latest.body["versions"] == ["1.0.0"]
    assert "provider_id" not in latest.body and latest.body["docs"]
    assert catalog.provider_release("acme", "null", "2.0.0") is None
    assert asyncio.run(catalog.providers(lambda _ns: True, "ACME")) == [("acme", "null")]
    assert asyncio.run(catalog.providers(lambda ns: ns != "acme")) == []

    svc.provider_publisher.store.set_provider_yanked(latest.provider_id, "1.0.0", True)
    svc.cache.invalidate()
    assert catalog.provider_release("acme", "null", None) is None
    exact = catalog.provider_release("acme", "null", "1.0.0")
    assert exact is not None and exact.body["yanked"] and exact.body["versions"] == []
    assert asyncio.run(catalog.providers(lambda _ns: True)) == []

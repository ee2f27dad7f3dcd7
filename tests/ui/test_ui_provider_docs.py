"""Provider documentation pages in the web UI: the release's docs/
pages listed on the provider page, each rendered at
/providers/NS/TYPE/VERSION/docs/ID from the HTML sanitised at ingest, and
nothing of a private provider's docs shown to a reader without access."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.services import Services
from tests.catalog.test_provider_docs import _ingest
from tests.providers.test_providers_forges import API, TOKEN
from tests.support.provider_dist import make_services, public_armor, publisher_key
from tests.ui.conftest import BASE, HTML, Ui

PAGE = "/providers/acme/null/1.0.0/docs/resources-resource"


@pytest.fixture
def ui(tmp_path: Path) -> Ui:
    data = tmp_path / "data"
    data.mkdir()
    (data / "gitreg.toml").write_text(
        f'[forges.ghe]\nkind = "github"\napi_url = "{API}"\ntoken = "{TOKEN}"\n'
    )
    svc: Services = make_services(data, public_url=BASE)
    svc.provider_publisher.keys.add("acme", public_armor(publisher_key()))
    _ingest(svc, tmp_path)
    return Ui(
        TestClient(
            create_app(svc.settings, svc), base_url=BASE, headers=HTML, follow_redirects=False
        ),
        svc,
    )


def test_the_provider_page_links_every_doc_and_each_doc_page_renders(ui: Ui) -> None:
    with ui.client:
        listing = ui.client.get("/providers/acme/null/1.0.0")
        assert listing.status_code == 200
        for doc_id in ("overview-index", "resources-resource", "data-sources-data_source"):
            assert f'href="/providers/acme/null/1.0.0/docs/{doc_id}"' in listing.text
        page = ui.client.get(PAGE)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "null_resource" in page.text and "Utility" in page.text
        assert "docs/resources/resource.md" in page.text
        # Sanitised at ingest: the README renderer's escaping holds on this page too.
        assert "<script>alert(1)" not in page.text and "alert(1)<" not in page.text
        assert 'href="javascript:' not in page.text
        assert ui.client.get("/providers/acme/null/1.0.0/docs/resources-nope").status_code == 404
        assert (
            ui.client.get("/providers/acme/null/9.9.9/docs/resources-resource").status_code == 404
        )


def test_a_private_providers_doc_pages_are_hidden_without_access(ui: Ui) -> None:
    ui.svc.auth.set_namespace_private("acme", True)
    ui.svc.cache.invalidate()
    with ui.client:
        hidden = ui.client.get(PAGE)
        missing = ui.client.get("/providers/nobody/none/1.0.0/docs/resources-resource")
        assert hidden.status_code == 404 and "null_resource" not in hidden.text
        assert hidden.text == missing.text  # nothing tells "exists" from "hidden"
        ui.sign_in(ui.token(["other"]))
        assert ui.client.get(PAGE).status_code == 404
        ui.sign_in(ui.token(["acme"]))
        shown = ui.client.get(PAGE)
        assert shown.status_code == 200 and "null_resource" in shown.text


def test_the_ui_and_the_api_share_one_cached_provider_record(
    ui: Ui, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider's record (every release and its docs listing) is built and
    held once for both surfaces, not once per surface."""
    built: list[int] = []
    real = ui.svc.provider_docs.provider_docs  # read only by `provider_record`

    def counted(provider_id: int) -> dict[int, str]:
        built.append(provider_id)
        return real(provider_id)

    monkeypatch.setattr(ui.svc.provider_docs, "provider_docs", counted)
    ui.svc.cache.invalidate()
    assert ui.client.get("/providers/acme/null").status_code == 200
    assert ui.client.get("/v1/providers/acme/null", headers={"accept": "*/*"}).status_code == 200
    assert ui.client.get(PAGE).status_code == 200
    assert len(built) == 1


def test_doc_pages_have_a_side_navigation_by_category_and_subcategory(ui: Ui) -> None:
    with ui.client:
        page = ui.client.get(PAGE).text
        nav = page[page.index('<nav class="doc-nav"') : page.index("</nav>", page.index("doc-nav"))]
        # Categories in the public registry's order, full type names, subcategories.
        assert nav.index("Overview") < nav.index("Resources") < nav.index("Data Sources")
        assert '<p class="nav-sub">Utility</p>' in nav
        assert f'<a href="{PAGE}" aria-current="page">null_resource</a>' in nav
        assert ">null_data_source</a>" in nav and ">Getting started</a>" in nav
        assert "<h1>null_resource " in page
        listing = ui.client.get("/providers/acme/null/1.0.0").text
        assert f'<a href="{PAGE}">null_resource</a>' in listing


def test_a_tfplugindocs_page_is_rendered_highlighted_and_named_in_full() -> None:
    from gitreg.catalog.pages_provider import doc_navigation
    from gitreg.catalog.provider_docs import Release, build_pages
    from tests.support.readmes import PROVIDER_DOC_PAGE

    problems: list[str] = []
    files = [
        ("docs/resources/server.md", "resources", PROVIDER_DOC_PAGE.encode()),
        ("docs/resources/volume.md", "resources", b"---\nsubcategory: Storage\n---\n# v\n"),
        ("docs/data-sources/image.md", "data-sources", b"# image\n"),
        ("docs/guides/start.md", "guides", b'---\npage_title: "Start here"\n---\nHi\n'),
    ]
    entries, pages = build_pages(files, Release("https://git.example.com/o/p.git", "c0"), problems)
    html = pages[0].html
    assert "schema generated" not in html and "<!--" not in html and "page_title" not in html
    assert '<pre class="hl"><code><span class="kr">resource</span>' in html
    assert 'id="doc-schema"' in html and entries[0]["subcategory"] == "Compute"
    nav = doc_navigation([e | {"url": ""} for e in entries], "ourcloud")
    assert [c["label"] for c in nav] == ["Guides", "Resources", "Data Sources"]
    resources = nav[1]["groups"]
    assert [(g["subcategory"], [d["name"] for d in g["docs"]]) for g in resources] == [
        ("Compute", ["ourcloud_server"]),
        ("Storage", ["ourcloud_volume"]),
    ]
    assert nav[0]["groups"][0]["docs"][0]["name"] == "Start here"
    assert nav[2]["groups"][0]["docs"][0]["name"] == "ourcloud_image"

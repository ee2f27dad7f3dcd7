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
    svc.providers.keys.add("acme", public_armor(publisher_key()))
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

"""A provider's documentation in a real browser: a doc page shows its side
navigation (categories, subcategories, full type names, the current page
marked), which leads to the release's other pages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.catalog.test_provider_docs import _ingest
from tests.providers.test_providers_forges import API, TOKEN
from tests.support.browser import chromium_context, require_chromium, screenshots
from tests.support.provider_dist import make_services, public_armor, publisher_key
from tests.support.server import RunningServer, start_server

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    require_chromium()
    data = tmp_path / "data"
    data.mkdir()
    (data / "gitreg.toml").write_text(
        f'[forges.ghe]\nkind = "github"\napi_url = "{API}"\ntoken = "{TOKEN}"\n'
    )
    svc = make_services(data)
    svc.provider_publisher.keys.add("acme", public_armor(publisher_key()))
    _ingest(svc, tmp_path)  # acme/null 1.0.0 from a forge release, its docs/ read
    svc.close()
    running = start_server(data, "--reconcile-interval", "0")
    try:
        yield running
    finally:
        running.stop()


def test_a_doc_page_has_its_side_navigation(server: RunningServer, tmp_path: Path) -> None:
    with chromium_context(tmp_path / "chromium-profile") as context:
        _browse(server, context, tmp_path)


def _browse(server: RunningServer, context: BrowserContext, artifacts: Path) -> None:
    page = context.new_page()
    page.goto(server.url + "/providers/acme/null/1.0.0/docs/resources-resource")
    nav = page.get_by_role("navigation", name="Provider documentation")
    expect(nav).to_be_visible()
    expect(nav.locator('a[aria-current="page"]')).to_have_text("null_resource")
    expect(nav).to_contain_text("Utility")
    expect(page.locator(".module-head h1")).to_contain_text("null_resource")
    screenshots(page, artifacts, "provider-doc")
    nav.get_by_role("link", name="null_data_source").click()
    page.wait_for_url("**/docs/data-sources-data_source")
    expect(nav.locator('a[aria-current="page"]')).to_have_text("null_data_source")
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: the text first
    content = page.locator(".doc-layout .content").bounding_box()
    side = nav.bounding_box()
    assert content is not None and side is not None and content["y"] < side["y"]

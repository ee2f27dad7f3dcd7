"""Search with filters (namespace, provider, has examples), an order
(relevance, recently published, downloads), providers among the results and
download counts on the cards; private namespaces never counted."""

from __future__ import annotations

import re

from tests.ui.conftest import Ui


def _cards(text: str) -> list[str]:
    return re.findall(r'<h[23] class="card-title"><a href="/modules/([^"]+)">', text)


def test_filters_narrow_and_counts_stay_with_the_words(ui: Ui) -> None:
    everything = ui.client.get("/search?sort=relevance").text
    assert _cards(everything) == ["acme/network/aws", "acme/vpc/aws"]
    assert '<option value="acme">acme (2)</option>' in everything
    assert "secret" not in everything  # not counted, not offered
    only = ui.client.get("/search?examples=1").text
    assert _cards(only) == ["acme/vpc/aws"]  # full_module has examples/basic
    assert "1 result" in only
    assert _cards(ui.client.get("/search?namespace=ACME&provider=aws").text) == [
        "acme/network/aws",
        "acme/vpc/aws",
    ]
    assert _cards(ui.client.get("/search?provider=google").text) == []
    assert _cards(ui.client.get("/search?namespace=secret").text) == []


def test_sort_by_downloads_and_recency(ui: Ui) -> None:
    for name, times in (("network", 7), ("vpc", 2)):
        for _ in range(times):
            answer = ui.client.get(f"/v1/modules/acme/{name}/aws/1.1.0/download")
            assert answer.status_code == 204
    ui.svc.downloads.flush()
    ui.svc.downloads.refresh()
    by_downloads = ui.client.get("/search?sort=downloads").text
    assert _cards(by_downloads) == ["acme/network/aws", "acme/vpc/aws"]
    assert "7 downloads (7 in 30 days)" in by_downloads
    assert "2 downloads (2 in 30 days)" in by_downloads
    recent = ui.client.get("/search?sort=recent").text
    stamps = re.findall(r'<time datetime="([^"]+)"', recent)
    assert stamps == sorted(stamps, reverse=True) and len(stamps) == 2


def test_providers_are_found_by_their_address(ui: Ui) -> None:
    found = ui.client.get("/search?q=null").text
    assert '<a href="/providers/acme/null">acme/null</a>' in found
    assert "vault" not in found  # secret/vault is private
    ui.sign_in(ui.token(["secret"]))
    assert '<a href="/providers/secret/vault">' in ui.client.get("/search?q=vault").text


def test_a_search_form_keeps_its_filters_across_pages(ui: Ui) -> None:
    text = ui.client.get("/search?q=acme&examples=1&sort=recent").text
    assert 'name="examples" type="checkbox" value="1" checked' in text
    assert '<option value="recent" selected>' in text

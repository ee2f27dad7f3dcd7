"""Private namespaces never show on any UI page to a reader who may not read
them: not anonymously, not with a token for another namespace, not in lists,
counts, pages or error texts. A 404 for a private page is the very
same page as for one that does not exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitreg.catalog.search_cache import SEARCH_CANDIDATES
from gitreg.catalog.store import SearchEntry
from gitreg.storage.bulk import BulkLoader, BulkModule, BulkVersion
from gitreg.storage.index import Index
from tests.ui.conftest import SECRET_WORDS, Ui

LIST_PAGES = [
    "/",
    "/search?q=vault",
    "/search?q=classified",
    "/search?q=hidden_secret",
    "/search?q=secret",
    "/search?q=aws",
    "/modules/acme",
    "/mirror",
    "/ui/token",
]
PRIVATE_PAGES = [
    "/modules/secret",
    "/modules/secret/vault/aws",
    "/modules/secret/vault/aws/1.0.0",
    "/modules/secret/vault/aws?tab=inputs",
    "/modules/secret/vault/aws?version=1.0.0",
    "/modules/SECRET/vault/aws",
    "/providers/secret/vault",
    "/providers/secret/vault/1.0.0",
]


def _assert_hidden(ui: Ui) -> None:
    missing = ui.client.get("/modules/nothing/here/aws")
    assert missing.status_code == 404
    for path in LIST_PAGES:
        page = ui.client.get(path)
        assert page.status_code == 200, path
        # The reader's own words come back (the search box): only they may.
        echoed = path.partition("q=")[2].lower()
        text = page.text.lower().replace(echoed, "") if echoed else page.text.lower()
        for word in SECRET_WORDS:
            assert word not in text, (path, word)
    for path in PRIVATE_PAGES:
        page = ui.client.get(path)
        assert page.status_code == 404, path
        assert page.text == missing.text, path  # nothing tells "private" from "absent"
    assert "2 modules published" in ui.client.get("/").text  # counts leave it out too


def test_anonymous_readers_never_see_a_private_namespace(ui: Ui) -> None:
    _assert_hidden(ui)


def test_a_token_for_another_namespace_sees_nothing_more(ui: Ui) -> None:
    ui.sign_in(ui.token(["acme"]))
    _assert_hidden(ui)


def test_a_revoked_token_cookie_sees_nothing_and_is_told(ui: Ui) -> None:
    token = ui.token(["secret"])
    ui.sign_in(token)
    assert ui.client.get("/modules/secret/vault/aws").status_code == 200
    for record in ui.svc.auth.tokens():
        ui.svc.auth.revoke(record.id)
    ui.svc.cache.invalidate()
    _assert_hidden(ui)
    assert "no longer works" in ui.client.get("/").text


@pytest.mark.parametrize("namespaces", [["secret"], []])
def test_a_read_token_for_the_namespace_sees_it_everywhere(ui: Ui, namespaces: list[str]) -> None:
    ui.sign_in(ui.token(namespaces))
    home = ui.client.get("/").text
    assert 'href="/modules/secret/vault/aws"' in home and "3 modules published" in home
    assert 'href="/providers/secret/vault"' in home
    assert "secret/vault" in ui.client.get("/search?q=classified").text
    page = ui.client.get("/modules/secret/vault/aws")
    assert page.status_code == 200 and 'class="badge private"' in page.text
    assert 'class="badge private"' not in ui.client.get("/modules/acme/vpc/aws").text
    assert "hidden_secret" in ui.client.get("/modules/secret/vault/aws?tab=inputs").text
    assert ui.client.get("/providers/secret/vault").status_code == 200
    assert "registry.terraform.io/secret/random" in ui.client.get("/mirror").text


def test_cached_pages_are_never_served_to_another_reader(ui: Ui) -> None:
    """The page cache keys on what the reader may see: a page built for a
    token holder is not served to the anonymous reader after it."""
    token = ui.token(["secret"])
    ui.sign_in(token)
    assert "secret/vault" in ui.client.get("/").text
    ui.client.cookies.delete("gitreg_ui_token")
    assert "secret" not in ui.client.get("/").text.lower()
    assert ui.client.get("/modules/secret/vault/aws").status_code == 404


def test_a_publish_token_reads_too_and_an_admin_token_everywhere(ui: Ui) -> None:
    ui.sign_in(ui.token(["secret"], scope="publish"))
    assert ui.client.get("/modules/secret/vault/aws").status_code == 200
    ui.sign_in(ui.token([], scope="admin"))  # the name promised this half too
    assert ui.client.get("/modules/secret/vault/aws").status_code == 200
    assert ui.client.get("/providers/secret/vault").status_code == 200


def test_a_locked_down_registry_shows_nothing_anonymously(ui: Ui) -> None:
    """`read_default = "token"`: every namespace not set public is private."""
    from starlette.testclient import TestClient

    from gitreg.app import create_app
    from gitreg.settings import load_settings
    from tests.ui.conftest import BASE, HTML

    settings = load_settings(
        {"data_dir": ui.svc.settings.data_dir, "public_url": BASE, "read_default": "token"},
        environ={},
    )
    with TestClient(create_app(settings), base_url="https://testserver") as client:
        client.headers.update(HTML)
        home = client.get("/").text
        assert "0 modules published" in home and "acme" not in home
        assert "registry.terraform.io" not in client.get("/mirror").text
        assert client.get("/modules/acme/vpc/aws").status_code == 404
        assert "0 results" in client.get("/search?q=vpc").text


@pytest.mark.slow
def test_private_matches_ranking_first_leave_the_public_results_as_they_were(
    ui: Ui, tmp_path: Path
) -> None:
    """More private matches than search ranks (1,000), all above the public
    ones, change nothing on an anonymous reader's results page."""
    before = ui.client.get("/search?q=greeting").text
    assert "acme/network/aws" in before
    version = BulkVersion("1.0.0", "c" * 40, "e" * 40, "a" * 64, 100)
    modules = [
        BulkModule(str(tmp_path / f"gone-{n}"), "secret", f"greeting-{n}", "aws", [version])
        for n in range(SEARCH_CANDIDATES + 1)
    ]
    assert isinstance(ui.svc.index, Index)  # open_index's, as BulkLoader needs
    BulkLoader(ui.svc.index).add_modules(modules)
    for module in ui.svc.index.modules():
        if module.name.startswith("greeting-"):
            entry = SearchEntry(module.id, "secret", module.name, "aws", "Greeting", "")
            ui.svc.catalog_index.put_search(entry)
    ui.svc.cache.invalidate()
    assert ui.client.get("/search?q=greeting").text == before

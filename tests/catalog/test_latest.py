"""The version offered as "latest" is the highest release, never a prerelease
while a release exists (`gitreg.versions.latest`), wherever gitreg names one:
the browse API and its `/download` redirect, the web UI and its snippets,
search cards and the search row, `gitreg modules` and `gitreg providers`; on
SQLite and PostgreSQL, where the search row records the version it holds."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html import unescape
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.catalog.extract import description, search_text
from gitreg.catalog.store import SearchEntry
from gitreg.cli import main
from gitreg.services import Services
from gitreg.settings import load_settings
from tests.cli.test_yank import _publish_providers, _run
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.postgres import Database

BASE = "https://registry.example.com"
HTML = {"accept": "text/html,application/xhtml+xml"}
# acme/vpc/aws: two releases, then a higher prerelease whose README has its own word.
MODULE_TAGS = (("v1.2.0", "giraffe"), ("v1.3.0", "giraffe"), ("v2.0.0-rc.1", "zebra"))


@dataclass
class Registry:
    client: TestClient
    svc: Services
    flags: list[str]  # the CLI's flags for the same data dir and database


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _publish_module(svc: Services, repo: GitRepo, address: str, tags: tuple[str, ...]) -> None:
    simple_module(repo)
    for tag in tags:
        word = dict(MODULE_TAGS).get(tag, "plain")
        repo.write("README.md", f"# {address}\n\nThe {word} network, {tag}.\n")
        repo.commit()
        repo.tag(tag)
    namespace, name, system = address.split("/")
    record = svc.index.add_repo(str(repo.path), "")
    svc.index.add_module(record.id, namespace, name, system, "", "")
    svc.publisher.sync_repo(record)


@pytest.fixture(params=["sqlite", "postgresql"])
def registry(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    make_repo: Callable[[str], GitRepo],
    capsys: pytest.CaptureFixture[str],
) -> Iterator[Registry]:
    data = tmp_path / "data"
    settings: dict[str, object] = {"data_dir": data, "public_url": BASE}
    flags = ["--data-dir", str(data)]
    if request.param == "postgresql":
        database: Database = request.getfixturevalue("postgres_database")
        key = tmp_path / "secret.key"
        key.write_text(os.urandom(32).hex())
        key.chmod(0o600)
        settings |= {"database_url": database.url, "secret_key_file": key}
        flags += ["--database-url", database.url, "--secret-key-file", str(key)]
    # Providers first, through the CLI: the app below then starts with them.
    _publish_providers(capsys, tmp_path, flags, ["1.0.0", "2.2.0-beta1"])
    app = create_app(load_settings(settings, environ={}))
    svc: Services = app.state.services
    _publish_module(svc, make_repo("vpc"), "acme/vpc/aws", tuple(t for t, _ in MODULE_TAGS))
    _publish_module(svc, make_repo("edge"), "acme/edge/aws", ("v0.1.0-alpha", "v0.1.0-beta"))
    capsys.readouterr()
    with TestClient(app, base_url="https://testserver", follow_redirects=False) as client:
        yield Registry(client, svc, flags)


def test_browse_api_and_download_offer_the_highest_release(registry: Registry) -> None:
    client = registry.client
    found = client.get("/v1/modules/acme/vpc/aws").json()
    assert found["version"] == "1.3.0"
    assert found["versions"] == ["2.0.0-rc.1", "1.3.0", "1.2.0"]  # newest first, all listed
    redirect = client.get("/v1/modules/acme/vpc/aws/download")
    assert redirect.status_code == 302
    assert redirect.headers["location"] == f"{BASE}/v1/modules/acme/vpc/aws/1.3.0/download"
    listed = {m["name"]: m["version"] for m in client.get("/v1/modules/acme").json()["modules"]}
    assert listed == {"edge": "0.1.0-beta", "vpc": "1.3.0"}  # no release: the highest prerelease
    hits = client.get("/v1/modules/search?q=giraffe").json()["modules"]
    assert [(m["name"], m["version"]) for m in hits] == [("vpc", "1.3.0")]
    # A prerelease still answers by exact version.
    assert client.get("/v1/modules/acme/vpc/aws/2.0.0-rc.1").json()["version"] == "2.0.0-rc.1"
    provider = client.get("/v1/providers/acme/null").json()
    assert provider["version"] == "1.0.0" and provider["versions"] == ["2.2.0-beta1", "1.0.0"]


def test_search_row_holds_the_latest_release_words(registry: Registry) -> None:
    svc = registry.svc
    module = svc.index.find_module("acme", "vpc", "aws")
    assert module is not None
    assert svc.catalog_index.search("giraffe", 10) == [(module.id, "acme")]
    assert svc.catalog_index.search("zebra", 10) == []  # the prerelease's README is not searched
    assert svc.catalog_index.search_version_keys()[module.id] == "1.3.0"


def test_reindex_rebuilds_a_search_row_made_from_a_prerelease(registry: Registry) -> None:
    """A row stored by an earlier release: the prerelease's words, no version key."""
    svc = registry.svc
    module = svc.index.find_module("acme", "vpc", "aws")
    assert module is not None
    stored = json.loads(svc.catalog_index.docs(module.id, "2.0.0-rc.1") or "{}")
    words = (description(stored), search_text(stored))
    svc.catalog_index.put_search(SearchEntry(module.id, "acme", "vpc", "aws", *words))
    assert svc.catalog_index.search("zebra", 10) == [(module.id, "acme")]
    assert main(["reindex", "--quiet", *registry.flags]) == 0
    assert svc.catalog_index.search("zebra", 10) == []
    assert svc.catalog_index.search("giraffe", 10) == [(module.id, "acme")]
    assert svc.catalog_index.search_version_keys()[module.id] == "1.3.0"


def test_ui_pages_snippets_and_cards(registry: Registry) -> None:
    client = registry.client
    client.headers.update(HTML)
    page = client.get("/modules/acme/vpc/aws")
    text = _text(page.text)
    assert page.status_code == 200 and "The giraffe network, v1.3.0." in text
    assert 'version = "~> 1.3"' in text and "not the latest" not in text
    assert "1.3.0 (latest)" in text and "2.0.0-rc.1 (latest)" not in text
    stable = _text(client.get("/modules/acme/vpc/aws/1.3.0").text)
    assert "not the latest" not in stable
    pre_page = client.get("/modules/acme/vpc/aws/2.0.0-rc.1").text
    pre = _text(pre_page)
    assert "This is not the latest version. Go to 1.3.0" in pre
    assert '<a href="/modules/acme/vpc/aws/1.3.0">Go to 1.3.0</a>' in pre_page
    assert 'version = "2.0.0-rc.1"' in pre  # a prerelease is pinned exactly
    edge = _text(client.get("/modules/acme/edge/aws").text)
    assert 'version = "0.1.0-beta"' in edge and "not the latest" not in edge
    for where in ("/search?q=giraffe", "/", "/modules/acme"):
        cards = client.get(where).text
        assert '<span class="badge">v1.3.0</span>' in cards, where
        assert "2.0.0-rc.1" not in cards and "zebra" not in cards, where
    provider = _text(client.get("/providers/acme/null").text)
    assert 'version = "~> 1.0"' in provider and "1.0.0 (latest)" in provider
    assert "not the latest" not in provider
    beta = _text(client.get("/providers/acme/null/2.2.0-beta1").text)
    assert "This is not the latest version. Go to 1.0.0" in beta
    assert 'version = "2.2.0-beta1"' in beta


def test_cli_listings_mark_the_latest(
    registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "modules", *registry.flags)
    assert code == 0
    assert "1.2.0, 1.3.0 (latest), 2.0.0-rc.1" in out
    assert "0.1.0-alpha, 0.1.0-beta (latest)" in out
    rows = json.loads(_run(capsys, "modules", "--json", *registry.flags)[1])
    assert {r["address"]: r["latest"] for r in rows} == {
        "acme/vpc/aws": "1.3.0",
        "acme/edge/aws": "0.1.0-beta",
    }
    code, out, _ = _run(capsys, "providers", *registry.flags)
    assert code == 0 and "  1.0.0 (latest)  [" in out and "  2.2.0-beta1  [" in out
    rows = json.loads(_run(capsys, "providers", "--json", *registry.flags)[1])
    assert rows[0]["latest"] == "1.0.0"


def test_yanking_the_release_falls_back_to_the_prerelease(
    registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    client, flags = registry.client, registry.flags
    for version in ("1.2.0", "1.3.0"):
        assert _run(capsys, "module", "yank", "acme/vpc/aws", version, *flags)[0] == 0
    registry.svc.cache.invalidate()  # the CLI wrote through services of its own
    assert client.get("/v1/modules/acme/vpc/aws").json()["version"] == "2.0.0-rc.1"
    module = registry.svc.index.find_module("acme", "vpc", "aws")
    assert module is not None
    assert registry.svc.catalog_index.search("zebra", 10) == [(module.id, "acme")]
    assert _run(capsys, "module", "yank", "acme/vpc/aws", "2.0.0-rc.1", *flags)[0] == 0
    registry.svc.cache.invalidate()
    # Every version yanked: no latest, as before (each still answers by exact version).
    assert client.get("/v1/modules/acme/vpc/aws").status_code == 404
    assert client.get("/v1/modules/acme/vpc/aws/download").status_code == 404
    assert client.get("/v1/modules/acme/vpc/aws/1.3.0").status_code == 200

"""Every page of the web UI renders what it should."""

from __future__ import annotations

import re
from html import unescape

from tests.support.gitrepo import GitRepo
from tests.ui.conftest import Ui


def _text(html: str) -> str:
    """The page's visible words, tags removed, whitespace collapsed."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_home_lists_recent_versions_namespaces_and_providers(ui: Ui) -> None:
    page = ui.client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    text = _text(page.text)
    assert "2 modules published" in text
    assert 'href="/modules/acme/vpc/aws"' in page.text
    assert 'href="/modules/acme/network/aws"' in page.text
    assert 'href="/modules/acme"' in page.text and "acme 2" in text
    assert 'href="/providers/acme/null"' in page.text
    assert 'role="search"' in page.text and '<label for="home-q">' in page.text


def test_search_finds_pages_and_echoes_the_query(ui: Ui) -> None:
    page = ui.client.get("/search?q=subnets")
    assert "1 result for subnets" in _text(page.text)
    assert 'href="/modules/acme/vpc/aws"' in page.text
    assert 'value="subnets"' in page.text  # the box keeps the words
    none = ui.client.get("/search?q=zzzznothing")
    assert "0 results for zzzznothing" in _text(none.text)
    assert "Type words" in ui.client.get("/search").text
    for bad in ("x", "-1", "²", "9" * 50):
        assert ui.client.get(f"/search?q=aws&page={bad}").status_code == 200


def test_search_pages_by_twenty(ui: Ui) -> None:
    from tests.ui.conftest import publish

    for i in range(21):
        repo = GitRepo(ui.svc.settings.data_dir.parent / f"many-{i}")
        repo.write("main.tf", 'variable "plentiful" {}\n')
        repo.write("README.md", "# plentiful\n")
        repo.commit()
        repo.tag("v0.1.0")
        publish(ui.svc, repo, "many", f"m{i:02d}", "aws")
    first = ui.client.get("/search?q=plentiful")
    assert "21 results" in _text(first.text) and "Page 1 of 2" in _text(first.text)
    assert 'href="/search?q=plentiful&amp;page=2"' in first.text
    second = ui.client.get("/search?q=plentiful&page=2")
    assert "Page 2 of 2" in _text(second.text) and second.text.count('class="card"') == 1


def test_module_page_has_tabs_snippet_and_provenance(ui: Ui) -> None:
    page = ui.client.get("/modules/acme/vpc/aws")
    assert page.status_code == 200
    html, text = page.text, _text(page.text)
    for tab in ("readme", "inputs", "outputs", "resources", "dependencies", "submodules"):
        assert f'href="?tab={tab}"' in html
    assert 'href="?tab=examples"' in html and 'href="?tab=versions"' in html
    assert 'id="panel-readme" aria-labelledby="tab-readme" tabindex="0"' in html
    assert 'id="panel-inputs" aria-labelledby="tab-inputs" hidden' in html
    assert "A VPC for the platform team." in text
    # The snippet: this registry's host, ~> MAJOR.MINOR, required inputs as placeholders.
    assert "registry.example.com/acme/vpc/aws" in text
    assert "~&gt; 1.1" in html and 'class="s2"' in html  # highlighted by Pygments
    assert 'name = "" # required, string' in text
    assert "cidr =" not in text  # has a default: not a placeholder
    module = ui.svc.index.find_module("acme", "vpc", "aws")
    assert module is not None
    commit = next(v for v in ui.svc.index.versions(module.id) if v.version == "1.1.0").commit_sha
    assert commit[:12] in text and "Tag moved no" in text
    assert "Published 20" in text
    assert "IPv6 support" in text  # the CHANGELOG section of 1.1.0


def test_each_tab_shows_its_panel_without_javascript(ui: Ui) -> None:
    expected = {
        "inputs": "Name of the VPC",
        "outputs": "The VPC&#39;s id",
        "resources": "aws_region",
        "dependencies": "cloudposse/label/null",
        "submodules": "modules/subnets",
        "examples": "examples/basic",
        "versions": 'href="/modules/acme/vpc/aws/1.0.0"',
    }
    for tab, content in expected.items():
        html = ui.client.get(f"/modules/acme/vpc/aws?tab={tab}").text
        panel = html.split(f'id="panel-{tab}"', 1)[1].split("</section>", 1)[0]
        assert not panel.split(">", 1)[0].count("hidden"), tab
        assert content in panel, tab
        assert 'id="panel-readme" aria-labelledby="tab-readme" hidden' in html
    assert 'aria-selected="true"' in ui.client.get("/modules/acme/vpc/aws?tab=bogus").text


def test_version_pages_and_the_picker(ui: Ui) -> None:
    old = ui.client.get("/modules/acme/vpc/aws/1.0.0")
    assert old.status_code == 200 and "not the latest version" in old.text
    assert 'value="1.0.0" data-href="/modules/acme/vpc/aws/1.0.0" selected' in old.text
    picked = ui.client.get("/modules/acme/vpc/aws?version=1.0.0")
    assert picked.status_code == 303
    assert picked.headers["location"] == "/modules/acme/vpc/aws/1.0.0"
    on_tab = ui.client.get("/modules/acme/vpc/aws?version=1.0.0&tab=inputs")
    assert on_tab.headers["location"] == "/modules/acme/vpc/aws/1.0.0?tab=inputs"
    assert ui.client.get("/modules/acme/vpc/aws?version=9.9.9").status_code == 404
    assert ui.client.get("/modules/acme/vpc/aws/9.9.9").status_code == 404
    assert ui.client.get("/modules/acme/nope/aws").status_code == 404
    assert ui.client.get("/modules/ac%20me/vpc/aws").status_code == 404


def test_namespace_provider_mirror_and_token_pages(ui: Ui) -> None:
    namespace = _text(ui.client.get("/modules/acme").text)
    assert "2 modules" in namespace and "acme/null" in namespace
    provider = ui.client.get("/providers/acme/null")
    text = _text(provider.text)
    assert provider.status_code == 200 and "linux_amd64" in text
    assert "registry.example.com/acme/null" in text and "~&gt; 1.0" in provider.text
    assert "Signing keys" in text and "ships no documentation" in text
    assert ui.client.get("/providers/acme/null/1.0.0").status_code == 200
    assert ui.client.get("/providers/acme/null/9.9.9").status_code == 404
    mirror = _text(ui.client.get("/mirror").text)
    assert "registry.terraform.io/hashicorp/random" in mirror and "3.6.0" in mirror
    assert "registry.terraform.io/hashicorp/label/null" in mirror and "0.25.0" in mirror
    token = ui.client.get("/ui/token")
    assert '<label for="token">Token</label>' in token.text


def test_provider_docs_entries_link_to_their_pages() -> None:
    from gitreg.catalog.pages_provider import _context

    found = {"namespace": "acme", "name": "dns", "versions": ["1.0.0"], "latest": "1.0.0"}
    release = {
        "version": "1.0.0",
        "docs": [
            {
                "id": "r/zone x",
                "title": "dns_zone",
                "category": "resources",
                "slug": "zone",
                "path": "docs/r/zone.md",
            },
        ],
    }
    context = _context(found, release, "registry.example.com")
    assert context["docs"][0]["url"] == "/providers/acme/dns/1.0.0/docs/r%2Fzone%20x"


def test_unknown_pages_are_html_for_browsers_and_json_for_the_api(ui: Ui) -> None:
    page = ui.client.get("/no/such/page")
    assert page.status_code == 404 and "Page not found" in page.text
    assert page.headers["content-type"].startswith("text/html")
    for path in ("/v1/nope", "/v1/modules/acme/nope/aws/versions", "/archives/x", "/.well-known/x"):
        answer = ui.client.get(path)
        assert answer.status_code in (400, 404), path
        assert answer.headers["content-type"] == "application/json", path
        assert "errors" in answer.json(), path
    api = ui.client.get("/no/such/page", headers={"accept": "application/json"})
    assert api.status_code == 404 and api.json() == {"errors": ["Not Found"]}


def test_pages_carry_the_security_headers(ui: Ui) -> None:
    for path in ("/", "/modules/acme/vpc/aws", "/search?q=x", "/nope", "/ui/token", "/mirror"):
        headers = ui.client.get(path).headers
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, path
        assert "unsafe-inline" not in csp and "default-src 'none'" in csp
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "same-origin"


def test_static_files_are_versioned_and_cached_for_a_year(ui: Ui) -> None:
    html = ui.client.get("/").text
    css = re.search(r'href="(/ui/static/[0-9a-f]{16}/style\.css)"', html)
    js = re.search(r'src="(/ui/static/[0-9a-f]{16}/ui\.js)"', html)
    assert css and js
    for url, kind in ((css.group(1), "text/css"), (js.group(1), "text/javascript")):
        answer = ui.client.get(url)
        assert answer.status_code == 200 and answer.headers["content-type"].startswith(kind)
        assert "immutable" in answer.headers["cache-control"]
    assert ui.client.get("/ui/static/0000000000000000/style.css").status_code == 404
    assert "<script>" not in html  # no inline script anywhere (CSP)


def test_pages_are_cached_and_a_publish_shows_at_once(ui: Ui) -> None:
    first = ui.client.get("/modules/acme/network/aws").text
    assert ui.client.get("/modules/acme/network/aws").text == first
    module = ui.svc.index.find_module("acme", "network", "aws")
    assert module is not None
    repo = GitRepo(ui.svc.settings.data_dir.parent / "acme-network")
    repo.write("more.tf", 'output "more" { value = 1 }\n')
    repo.commit()
    repo.tag("v1.2.0")
    ui.svc.publisher.sync_repo(ui.svc.index.repo(module.repo_id))
    after = ui.client.get("/modules/acme/network/aws").text
    assert "1.2.0 (latest)" in after and after != first
    assert "1.2.0" in ui.client.get("/").text


def test_a_moved_tag_is_shown_on_its_version(ui: Ui) -> None:
    module = ui.svc.index.find_module("acme", "network", "aws")
    assert module is not None
    repo = GitRepo(ui.svc.settings.data_dir.parent / "acme-network")
    repo.write("moved.tf", "# the tag moves here\n")
    moved_to = repo.commit()
    repo.tag("v1.1.0", force=True)
    ui.svc.publisher.sync_repo(ui.svc.index.repo(module.repo_id))
    text = _text(ui.client.get("/modules/acme/network/aws/1.1.0").text)
    assert f"Tag moved yes later seen at {moved_to[:12]}" in text
    assert "Tag moved no" in _text(ui.client.get("/modules/acme/network/aws/1.0.0").text)


def test_api_paths_answer_as_before_to_a_browser(ui: Ui) -> None:
    """The UI's routes come last and shadow no API path (gitreg/ui/routes.py)."""
    for path in (
        "/.well-known/terraform.json",
        "/v1/modules",
        "/v1/modules/acme/vpc/aws",
        "/v1/modules/acme/vpc/aws/versions",
        "/v1/providers/acme/null/versions",
        "/healthz",
    ):
        answer = ui.client.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["content-type"].startswith("application/json"), path
    mirror = ui.client.get("/mirror/registry.example.com/acme/null/index.json")
    assert mirror.status_code == 200 and "1.0.0" in mirror.json()["versions"]


def test_search_page_answers_live_in_the_search_lru_not_the_metadata_cache(ui: Ui) -> None:
    """Made-up queries from the search page must not fill the metadata cache
    (and push out cached `versions` answers): they share the API's small LRU."""
    for number in range(5):
        assert ui.client.get(f"/search?q=made-up-{number}").status_code == 200
    assert len(ui.svc.searches) == 5
    cached = ui.svc.cache._entries
    assert not [key for key in cached if "made-up-0" in repr(key)]

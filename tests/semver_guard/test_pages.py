"""The web UI: the module page's label, "Changes" tab link and version marks,
and the Changes page (diff, picker, refused versions), with access as the
module page's."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.services import Services
from gitreg.settings import load_settings
from tests.semver_guard.test_publish import V1, WITH_EXTRA, WITHOUT_SIZE, release
from tests.support.gitrepo import GitRepo
from tests.ui.test_ui_xss import assert_inert

HTML = {"accept": "text/html"}


@dataclass
class Site:
    client: TestClient
    svc: Services
    repo: GitRepo

    def sync(self) -> None:
        self.svc.publisher.sync_repo(self.svc.index.repo_by_url(str(self.repo.path)))
        self.svc.cache.invalidate()


@pytest.fixture
def site(tmp_path: Path, make_repo: Callable[[str], GitRepo]) -> Iterator[Site]:
    settings = load_settings({"data_dir": tmp_path / "data"}, environ={})
    app = create_app(settings)
    svc: Services = app.state.services
    repo = make_repo("mod")
    release(repo, V1, "v1.2.0")
    release(repo, WITHOUT_SIZE, "v1.3.0")
    record = svc.index.add_repo(str(repo.path), "")
    svc.index.add_module(record.id, "acme", "mod", "aws", "", "")
    with TestClient(app, base_url="https://testserver", follow_redirects=False) as client:
        client.headers.update(HTML)
        found = Site(client, svc, repo)
        found.sync()
        yield found


def test_the_module_page_labels_a_breaking_release(site: Site) -> None:
    page = site.client.get("/modules/acme/mod/aws/1.3.0")
    assert page.status_code == 200
    notice = re.search(r'<p class="notice semver" role="status">(.*?)</p>', page.text, re.S)
    assert notice is not None
    assert "breaking change in a minor release" in notice.group(1)
    assert "variable &#34;size&#34; removed" in notice.group(1)
    assert 'id="tab-changes"' in page.text
    assert "1.3.0 (latest) (breaking)</option>" in page.text
    assert 'badge warn" title="breaking change in a minor/patch release">breaking' in page.text
    older = site.client.get("/modules/acme/mod/aws/1.2.0").text
    assert 'class="notice semver"' not in older


def test_the_changes_page_shows_the_diff_and_picks_any_two(site: Site) -> None:
    page = site.client.get("/modules/acme/mod/aws/changes")
    assert page.status_code == 200
    assert page.headers["cache-control"] == "private, no-cache"
    assert_inert(page.text, "changes")
    assert "Changes in acme/mod/aws 1.3.0" in page.text
    assert "<h2>Breaking (1)</h2>" in page.text
    assert "variable &#34;size&#34; removed" in page.text
    assert '<option value="1.2.0" selected>' in page.text  # from
    back = site.client.get("/modules/acme/mod/aws/changes?version=1.2.0&from=1.3.0").text
    assert "<h2>Additive (1)</h2>" in back and "optional variable &#34;size&#34; added" in back
    first = site.client.get("/modules/acme/mod/aws/changes?version=1.2.0").text
    assert "1.2.0 is the first version" in first


def test_refused_versions_are_listed(site: Site) -> None:
    site.svc.semver.set_policy("acme/mod/aws", "enforce")
    release(site.repo, V1, "v1.4.0")  # restores "size": fine against 1.3.0
    release(site.repo, WITH_EXTRA.replace('"size"', '"count"'), "v1.5.0")
    site.sync()
    page = site.client.get("/modules/acme/mod/aws/changes").text
    assert "Refused versions" in page
    assert re.search(r"1\.5\.0</a> \(tag <code>v1\.5\.0</code>", page)
    refused = site.client.get("/modules/acme/mod/aws/changes?version=1.5.0").text
    assert "refused: breaking change in a minor release" in refused


def test_bad_or_missing_versions(site: Site) -> None:
    assert site.client.get("/modules/acme/mod/aws/changes?version=9.9.9").status_code == 404
    assert site.client.get("/modules/acme/nope/aws/changes").status_code == 404
    assert site.client.get("/modules/acme/mod/aws/changes?from=x<y").status_code == 400


def test_a_private_namespace_is_not_found(site: Site) -> None:
    site.svc.auth.set_namespace_private("acme", True)
    site.svc.cache.invalidate()
    missing = site.client.get("/modules/acme/nope/aws/changes")
    hidden = site.client.get("/modules/acme/mod/aws/changes")
    assert hidden.status_code == missing.status_code == 404
    assert "size" not in hidden.text
    api = site.client.get("/v1/modules/acme/mod/aws/1.3.0/changes", headers={"accept": "*/*"})
    assert api.status_code == 401 and "size" not in api.text

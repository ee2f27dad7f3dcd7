"""A README as its author wrote it, on the module page; the files and images
it links to, served from the version's archive; submodule and example pages;
dependencies linked; and all of it as invisible as the module page for a
private namespace."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.readmes import PNG, network_module
from tests.ui.conftest import Ui, publish
from tests.ui.test_ui_xss import assert_inert

HOST = "registry.example.com"
PAGE = "/modules/acme/net/aws/1.0.0"
SECRET = "/modules/secret/net/aws/1.0.0"


@pytest.fixture
def site(ui: Ui, make_repo: Callable[[str], GitRepo]) -> Ui:
    for namespace in ("acme", "secret"):
        repo = make_repo(f"{namespace}-network-files")
        network_module(repo, HOST)
        repo.commit()
        repo.tag("v1.0.0")
        publish(ui.svc, repo, namespace, "net", "aws")
    ui.svc.cache.invalidate()
    return ui


def test_the_readme_renders_as_written_on_the_module_page(site: Ui) -> None:
    page = site.client.get("/modules/acme/net/aws")
    assert page.status_code == 200
    text = page.text
    assert_inert(text, "module page")
    assert '<p align="center">' in text and "<details>" in text and "&lt;details" not in text
    assert f'<img src="{PAGE}/raw/docs/logo.png" width="120" alt="Network logo">' in text
    assert 'id="readme-usage"' in text and 'href="#readme-usage"' in text
    assert 'id="readme-inputs"' in text and 'id="panel-inputs"' in text
    assert '<th class="align-center">Required</th>' in text and "style=" not in text
    assert "BEGIN_TF_DOCS" not in text
    # Described by its first paragraph of prose, past the logo and badges.
    assert '<p class="lead">Builds the platform network, its subnets and routes.</p>' in text


def test_images_and_files_come_from_the_archive_with_safe_headers(site: Ui) -> None:
    image = site.client.get(f"{PAGE}/raw/docs/logo.png")
    assert image.status_code == 200 and image.content == PNG
    assert image.headers["content-type"] == "image/png"
    assert image.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in image.headers["content-security-policy"]
    svg = site.client.get(f"{PAGE}/raw/docs/diagram.svg")
    assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml"
    assert "sandbox" in svg.headers["content-security-policy"]
    html = site.client.get(f"{PAGE}/raw/docs/page.html")
    assert html.headers["content-type"] == "application/octet-stream"
    assert html.headers["content-disposition"] == "attachment"
    for missing in ("docs/none.png", "../../../etc/passwd", "docs", "%2e%2e/x", "docs//logo.png"):
        assert site.client.get(f"{PAGE}/raw/{missing}").status_code == 404, missing
    assert site.client.get("/modules/acme/net/aws/9.9.9/raw/docs/logo.png").status_code == 404


def test_a_file_view_shows_the_file_of_that_version(site: Ui) -> None:
    view = site.client.get(f"{PAGE}/files/main.tf")
    assert view.status_code == 200 and '<pre class="hl"' in view.text
    assert '<span class="kr">variable</span>' in view.text
    notes = site.client.get(f"{PAGE}/files/docs/design.md")
    assert '<h1 id="readme-design">Design</h1>' in notes.text
    assert f'href="{PAGE}/files/README.md"' in notes.text
    svg = site.client.get(f"{PAGE}/files/docs/diagram.svg")
    assert f'<img class="file-image" src="{PAGE}/raw/docs/diagram.svg"' in svg.text
    assert "<svg" not in svg.text  # never inline
    assert_inert(site.client.get(f"{PAGE}/files/docs/page.html").text, "file view")
    assert site.client.get(f"{PAGE}/files/nothing.tf").status_code == 404


def test_a_submodule_has_its_own_page_and_snippet(site: Ui) -> None:
    page = site.client.get(f"{PAGE}/modules/subnets")
    assert page.status_code == 200
    text = page.text
    assert "Splits a block into subnets." in text
    assert f"{HOST}/acme/net/aws//modules/subnets" in re.sub(r"<[^>]+>", "", text)
    assert "<code>cidr</code>" in text and "The block to split" in text
    listing = site.client.get("/modules/acme/net/aws?tab=submodules").text
    assert f'href="{PAGE}/modules/subnets"' in listing
    assert site.client.get(f"{PAGE}/modules/none").status_code == 404


def test_an_example_shows_its_files_highlighted(site: Ui) -> None:
    page = site.client.get(f"{PAGE}/examples/complete")
    assert page.status_code == 200
    assert "Every option at once." in page.text
    assert '<span class="kr">module</span>' in page.text
    # Its call of the module itself links to the module's page.
    assert f'<a href="{PAGE}"><code>../../</code></a>' in page.text


def test_dependencies_served_here_link_to_their_pages(site: Ui) -> None:
    text = site.client.get("/modules/acme/net/aws?tab=dependencies").text
    assert f'<a href="/modules/acme/vpc/aws"><code>{HOST}/acme/vpc/aws</code></a>' in text
    assert f'<a href="/providers/acme/null"><code>{HOST}/acme/null</code></a>' in text
    assert f'<a href="{PAGE}/modules/subnets"><code>./modules/subnets</code></a>' in text


def test_a_private_namespace_files_are_invisible_without_access(site: Ui) -> None:
    paths = [
        f"{SECRET}/raw/docs/logo.png",
        f"{SECRET}/files/main.tf",
        f"{SECRET}/modules/subnets",
        f"{SECRET}/examples/complete",
    ]
    for path in paths:
        answer = site.client.get(path)
        assert answer.status_code == 404, path
        assert "subnets" not in answer.text and "PNG" not in answer.text
    site.sign_in(site.token(["secret"]))
    for path in paths:
        assert site.client.get(path).status_code == 200, path

"""READMEs as their authors wrote them, in a real browser (Debian's Chromium,
tests/support/browser.py) against a real `gitreg serve`.

A terraform-docs README with `<p align=center>`, a sized logo, `<details>`,
anchors, aligned tables, a relative image, a relative SVG and relative links,
grown to about 200 KB by its Inputs table, is published with a submodule and
an example. The browser checks what only a browser shows: the strict policy
reports no violation (alignment is by classes), the table cells are aligned,
the README's own contents links jump to its own headings, the images load,
`<details>` opens, the rows past the first hundred of the long table are
folded and open for a link into them, the provision snippet is not cut off
at desktop width, no script of the README runs; and the submodule's page
gives a snippet that the real `terraform init` installs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, ConsoleMessage, Dialog, Page, expect

from tests.support.browser import chromium_context, require_chromium, screenshots
from tests.support.gitrepo import GitRepo
from tests.support.readmes import TERRAFORM_DOCS_README, network_module
from tests.support.server import RunningServer, cli, free_port, start_server
from tests.support.terraform import run_terraform

pytestmark = pytest.mark.slow

ROWS = 1500  # the Inputs table that makes the README about 200 KB


def _large_readme() -> str:
    rows = "\n".join(
        f'| <a name="input_setting_{i}"></a> [setting\\_{i}](#input\\_setting\\_{i}) '
        f"| Setting number {i} of the network, with a description of some length | "
        f'`string` | `"value-{i}"` | no |'
        for i in range(ROWS)
    )
    extra = "\n\n## More inputs\n\nOne of them: [setting 1200](#input_setting_1200).\n\n"
    extra += "| Name | Description | Type | Default | Required |\n"
    extra += "|------|-------------|:----:|--------:|:--------:|\n" + rows + "\n"
    return (
        TERRAFORM_DOCS_README
        + extra
        + (
            '\n<p align="center"><a href="#readme-usage">'
            "<img src=x onerror=\"window.__xss='onerror'\"></a></p>\n"
            "<script>window.__xss = 'script'</script>\n"
        )
    )


@dataclass
class Site:
    server: RunningServer
    artifacts: Path


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    require_chromium()
    data = tmp_path / "data"
    port = free_port()
    repo = GitRepo(tmp_path / "terraform-aws-net")
    network_module(repo, f"127.0.0.1:{port}")
    repo.write("README.md", _large_readme())
    repo.commit("first")
    repo.tag("v1.0.0")
    cli(data, "repo", "add", str(repo.path), "--module", "platform/net/aws")
    server = start_server(data, "--reconcile-interval", "0", port=port)
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    print(f"\nscreenshots: {artifacts}")
    try:
        yield Site(server, artifacts)
    finally:
        server.stop()


@pytest.fixture
def browser(site: Site, tmp_path: Path) -> Iterator[BrowserContext]:
    with chromium_context(tmp_path / "chromium-profile") as context:
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.server.url)
        yield context


def _watch(page: Page) -> tuple[list[str], list[str]]:
    """(console errors and warnings, dialogs) of the page from now on."""
    console: list[str] = []
    dialogs: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            console.append(message.text)

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("console", on_console)
    page.on("dialog", on_dialog)
    return console, dialogs


def test_a_large_terraform_docs_readme_renders_as_written(
    site: Site, browser: BrowserContext
) -> None:
    page = browser.new_page()
    console, dialogs = _watch(page)
    page.add_init_script(
        "window.__violations = [];"
        "document.addEventListener('securitypolicyviolation',"
        " e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));"
    )
    page.set_viewport_size({"width": 1366, "height": 900})
    url = site.server.url + "/modules/platform/net/aws"
    page.goto(url)
    readme = page.locator("#panel-readme .readme")
    advanced = readme.locator("details summary", has_text="Advanced settings")
    expect(advanced).to_be_visible()
    page.wait_for_load_state("load")

    # The policy stays strict and nothing violates it: alignment is by classes.
    assert page.evaluate("() => window.__violations") == []
    assert [c for c in console if "Content Security Policy" in c] == []
    right = readme.locator("td.align-right").first
    assert right.evaluate("e => getComputedStyle(e).textAlign") == "right"
    centre = readme.locator('p[align="center"]').first
    assert centre.evaluate("e => getComputedStyle(e).textAlign") == "center"

    # The relative images load from the version's archive; the SVG as an image.
    for name in ("Network logo", "Diagram"):
        image = readme.get_by_role("img", name=name)
        image.scroll_into_view_if_needed()
        expect(image).to_have_js_property("complete", True)
        assert image.evaluate("e => e.naturalWidth") > 0, name

    # <details> opens; no script of the README ran.
    advanced.click()
    expect(readme.get_by_text("Routes can be")).to_be_visible()
    assert page.evaluate("() => window.__xss === undefined") and dialogs == []

    # The provision snippet fits its panel at desktop width.
    snippet = page.locator("#usage")
    assert snippet.evaluate("e => e.scrollWidth <= e.clientWidth"), "snippet cut off"
    expect(snippet).to_contain_text(f'"{site.server.host}/platform/net/aws"')
    screenshots(page, site.artifacts, "readme-large")

    # The README's own table of contents jumps to its own headings.
    page.evaluate("() => window.scrollTo(0, 0)")
    readme.get_by_role("link", name="Outputs", exact=True).click()
    page.wait_for_url("**#readme-outputs")
    heading = readme.locator("#readme-outputs")
    top = heading.evaluate("e => e.getBoundingClientRect().top")
    assert 0 <= top < 100, top
    assert page.evaluate("() => document.getElementById('panel-outputs').hidden")
    # The rows past the first hundred of the long table are folded; a link
    # to an anchor among them, followed or opened, opens them and shows it.
    folded = readme.locator("details", has_text="Rows 101 to 1,500 of this table")
    row = readme.locator("tr", has=page.locator('a[name="readme-input_setting_1200"]'))
    for follow in ("click", "load"):
        page.goto(url)
        assert folded.evaluate("e => e.open") is False
        if follow == "click":
            readme.get_by_role("link", name="setting 1200", exact=True).click()
        else:
            page.goto(url + "#readme-input_setting_1200")
        page.wait_for_url("**#readme-input_setting_1200")
        assert folded.evaluate("e => e.open") is True
        expect(row).to_be_in_viewport()
    # A link elsewhere in the README opens the file view of that version.
    page.goto(url)
    page.locator("#panel-readme").get_by_role("link", name="the design notes").click()
    page.wait_for_url("**/modules/platform/net/aws/1.0.0/files/docs/design.md")
    expect(page.get_by_role("heading", name="Design", exact=True)).to_be_visible()
    assert [c for c in console if "Content Security Policy" in c] == []


def test_a_phone_sees_the_title_the_snippet_and_the_readme_first(
    site: Site, browser: BrowserContext
) -> None:
    page = browser.new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(site.server.url + "/modules/platform/net/aws")
    tops = page.evaluate(
        """() => ['.module-head h1', '#usage', '#readme-network'].map(
            s => document.querySelector(s).getBoundingClientRect().top)"""
    )
    assert all(0 <= top < 844 for top in tops), tops
    # Nothing pushes the page sideways: wide tables and the tabs scroll in place.
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    tabs = page.locator(".tabs")
    assert tabs.evaluate("e => getComputedStyle(e).overflowX") == "auto"
    screenshots(page, site.artifacts, "module-phone")
    page.goto(site.server.url + "/modules/platform/net/aws?tab=inputs")
    table = page.locator("#panel-inputs .table-wrap")
    assert table.evaluate("e => e.scrollWidth > e.clientWidth")
    assert table.get_attribute("tabindex") == "0"  # reachable from the keyboard
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390


def test_submodule_and_example_pages(site: Site, browser: BrowserContext, tmp_path: Path) -> None:
    page = browser.new_page()
    console, dialogs = _watch(page)
    page.goto(site.server.url + "/modules/platform/net/aws?tab=submodules")
    page.locator("#panel-submodules").get_by_role("link", name="modules/subnets").click()
    page.wait_for_url("**/modules/platform/net/aws/1.0.0/modules/subnets")
    expect(page.get_by_role("heading", name="Inputs")).to_be_visible()
    screenshots(page, site.artifacts, "submodule")
    snippet = page.locator("#usage").text_content() or ""
    assert f'"{site.server.host}/platform/net/aws//modules/subnets"' in snippet
    workdir = tmp_path / "consumer"
    workdir.mkdir()
    (workdir / "main.tf").write_text(snippet)
    run_terraform(workdir, "init", ca_pem=site.server.ca_pem)
    assert (workdir / ".terraform/modules/subnets/modules/subnets/main.tf").is_file()

    page.goto(site.server.url + "/modules/platform/net/aws/1.0.0/examples/complete")
    expect(page.locator("pre.hl").first).to_contain_text('source = "../../"')
    link = page.locator("#dependencies").locator("xpath=..").get_by_role("link", name="../../")
    expect(link).to_have_attribute("href", "/modules/platform/net/aws/1.0.0")
    screenshots(page, site.artifacts, "example")
    assert [c for c in console if "Content Security Policy" in c] == [] and dialogs == []

"""The web UI in a real browser: Debian's Chromium driven by
Playwright against a real `gitreg serve` over TLS.

A module with a README, inputs, outputs, a submodule and an example is
published from a real git repository. The browser opens the home page,
searches, opens the module, switches tabs (mouse and keyboard) and versions,
and copies the usage snippet; that snippet goes into a main.tf and the real
`terraform init` installs the module (the pinned 1.0.3, and the newest
terraform on PATH when there is one). Every page is screenshotted in light
and dark mode into the artifacts directory printed at the start. The README
carries `<script>` and `onerror=` payloads: no dialog may open and the flag
they would set must stay unset.

Outside CI the test is skipped when /usr/bin/chromium is missing; in CI
(`CI=true`, where .ci/run installs it) a missing browser fails.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Dialog, Page, expect

from tests.support.browser import chromium_context, require_chromium, screenshots
from tests.support.gitrepo import GitRepo
from tests.support.provider_dist import make_dist
from tests.support.server import RunningServer, cli, start_server
from tests.support.terraform import run_terraform

README = """# Network

Builds the platform network, its subnets and routes.

<script>window.__xss = "script"; alert("script")</script>
<img src=x onerror="window.__xss='onerror'; alert('onerror')">
<svg onload=alert(1)></svg>
[click](javascript:window.__xss='link')

```hcl
module "network" {
  source = "somewhere"
}
```
"""
MAIN_TF = """
variable "name" {
  type        = string
  description = "Name of the network <img src=x onerror=alert(1)>"
}
variable "cidr" {
  type    = string
  default = "10.0.0.0/16"
}
module "subnets" {
  source = "./modules/subnets"
  cidr   = var.cidr
}
output "cidr" {
  value       = var.cidr
  description = "The network's CIDR block"
}
output "subnets" {
  value = module.subnets.ids
}
"""


@dataclass
class Site:
    server: RunningServer
    artifacts: Path
    token: str  # a read token for the private namespace `team`


def _publish(root: Path, data: Path) -> None:
    repo = GitRepo(root / "terraform-aws-network")
    repo.write("main.tf", MAIN_TF)
    repo.write("README.md", README)
    repo.write("modules/subnets/main.tf", 'variable "cidr" {}\noutput "ids" { value = [] }\n')
    repo.write("modules/subnets/README.md", "# Subnets\n\nCarves the network into subnets.\n")
    repo.write("examples/basic/main.tf", 'module "network" {\n  source = "../.."\n}\n')
    repo.commit("first")
    repo.tag("v1.0.0")
    repo.write("outputs.tf", 'output "name" {\n  value = var.name\n}\n')
    repo.commit("second")
    repo.tag("v1.1.0")
    cli(data, "repo", "add", str(repo.path), "--module", "platform/network/aws")
    cli(data, "key", "generate", "platform")
    dist = make_dist("dns", "0.4.1", ["linux_amd64", "darwin_arm64"], b"not a real binary")
    del dist.files[dist.shasums_name]
    cli(
        data,
        "provider",
        "publish",
        "platform/dns",
        "0.4.1",
        str(dist.write(root / "dist")),
        "--sign",
    )
    private = GitRepo(root / "terraform-aws-vault")
    private.write("main.tf", 'output "x" {\n  value = 1\n}\n')
    private.write("README.md", "# Vault\n\nThe team's classified vault.\n")
    private.commit("private")
    private.tag("v0.1.0")
    cli(data, "repo", "add", str(private.path), "--module", "team/vault/aws")
    cli(data, "namespace", "set", "team", "--private")


def _read_token(data: Path) -> str:
    out = cli(data, "token", "create", "--scope", "read", "--namespace", "team").stdout
    return out.strip().splitlines()[-1]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    require_chromium()
    data = tmp_path / "data"
    _publish(tmp_path, data)
    token = _read_token(data)
    server = start_server(data, "--reconcile-interval", "0")
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    print(f"\nscreenshots: {artifacts}")
    try:
        yield Site(server, artifacts, token)
    finally:
        server.stop()


@pytest.fixture
def browser(site: Site, tmp_path: Path) -> Iterator[BrowserContext]:
    with chromium_context(tmp_path / "chromium-profile") as context:
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.server.url)
        yield context


def _trap(page: Page) -> list[str]:
    """Every dialog a page opens is recorded (and dismissed)."""
    opened: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        opened.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    return opened


def _assert_nothing_ran(page: Page, dialogs: list[str]) -> None:
    assert page.evaluate("() => window.__xss === undefined"), page.evaluate("window.__xss")
    assert dialogs == []


def test_browse_search_tabs_versions_copy_and_init(
    site: Site, browser: BrowserContext, tmp_path: Path
) -> None:
    page = browser.new_page()
    dialogs = _trap(page)
    url = site.server.url

    page.goto(url + "/")
    page.evaluate("() => alert('probe')")  # the trap itself works
    assert dialogs == ["probe"]
    dialogs.clear()
    expect(page.get_by_role("heading", name="Terraform modules and providers")).to_be_visible()
    expect(page.get_by_role("link", name="platform/network/aws")).to_be_visible()
    screenshots(page, site.artifacts, "home")

    page.get_by_label("Search modules by name").fill("subnets")
    page.get_by_label("Search modules by name").press("Enter")
    expect(page.get_by_role("status")).to_contain_text("1 result for subnets")
    screenshots(page, site.artifacts, "search")

    page.get_by_role("link", name="platform/network/aws").click()
    expect(page.locator(".module-head h1")).to_have_text("platform/network/aws")
    expect(page.locator("#panel-readme")).to_contain_text("Builds the platform network")
    _assert_nothing_ran(page, dialogs)
    screenshots(page, site.artifacts, "module-readme")
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: one column
    screenshots(page, site.artifacts, "module-phone")
    page.set_viewport_size({"width": 1280, "height": 900})

    page.get_by_role("tab", name="Inputs").click()
    expect(page.locator("#panel-inputs")).to_be_visible()
    expect(page.locator("#panel-readme")).to_be_hidden()
    expect(page.locator("#panel-inputs")).to_contain_text("Name of the network <img")
    assert "tab=inputs" in page.url
    screenshots(page, site.artifacts, "module-inputs")
    page.keyboard.press("ArrowRight")  # the focused tab list moves to Outputs
    expect(page.get_by_role("tab", name="Outputs")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#panel-outputs")).to_contain_text("The network's CIDR block")
    for tab in ("Submodules", "Examples"):
        page.get_by_role("tab", name=tab).click()
        screenshots(page, site.artifacts, f"module-{tab.lower()}")
    expect(page.locator("#panel-submodules")).to_be_hidden()
    expect(page.locator("#panel-examples")).to_contain_text("examples/basic")

    page.get_by_label("Version", exact=True).select_option("1.0.0")
    page.get_by_role("button", name="Go").click()  # arrow keys alone never navigate
    page.wait_for_url("**/modules/platform/network/aws/1.0.0?tab=examples")  # same tab
    expect(page.locator("#panel-examples")).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text("not the latest version")
    screenshots(page, site.artifacts, "module-1.0.0")
    page.get_by_role("tab", name="Versions").click()
    page.locator("#panel-versions").get_by_role("link", name="1.1.0").click()
    page.wait_for_url("**/modules/platform/network/aws/1.1.0")
    _assert_nothing_ran(page, dialogs)

    snippet = _copy_snippet(page)
    assert f'source  = "{site.server.host}/platform/network/aws"' in snippet
    assert 'version = "~> 1.1"' in snippet and "name =" in snippet
    _init_with_every_terraform(snippet, site, tmp_path)

    _other_pages(page, site)
    _assert_nothing_ran(page, dialogs)
    _private_with_a_token(page, site, browser)


def _private_with_a_token(page: Page, site: Site, browser: BrowserContext) -> None:
    """Hidden until the form presents a read token; the cookie is out of
    scripts' reach and strict; forgetting it hides the namespace again."""
    page.goto(site.server.url + "/")
    assert "team/vault" not in page.content()
    assert page.goto(site.server.url + "/modules/team/vault/aws").status == 404  # type: ignore[union-attr]
    page.goto(site.server.url + "/ui/token")
    page.get_by_label("Token").fill("gitreg_" + "x" * 43)
    page.get_by_role("button", name="Use this token").click()
    expect(page.get_by_role("alert")).to_contain_text("That token is not valid")
    page.get_by_label("Token").fill(site.token)
    page.get_by_role("button", name="Use this token").click()
    page.wait_for_url(site.server.url + "/")
    expect(page.get_by_role("link", name="team/vault/aws")).to_be_visible()
    screenshots(page, site.artifacts, "home-with-token")
    cookie = next(c for c in browser.cookies() if c["name"] == "gitreg_ui_token")
    assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict"
    assert "gitreg_ui_token" not in page.evaluate("() => document.cookie")
    page.goto(site.server.url + "/ui/token")
    page.get_by_role("button", name="Forget the token").click()
    page.wait_for_url(site.server.url + "/")
    assert "team/vault" not in page.content()


def _init_with_every_terraform(snippet: str, site: Site, tmp_path: Path) -> None:
    """The pinned Terraform 1.0.3, and the newest one on PATH when there is one."""
    binaries: list[Path | None] = [None]
    on_path = shutil.which("terraform")
    if on_path:
        binaries.append(Path(on_path))
    for number, binary in enumerate(binaries):
        workdir = tmp_path / f"consumer-{number}"
        workdir.mkdir()
        (workdir / "main.tf").write_text(snippet)
        run_terraform(workdir, "init", ca_pem=site.server.ca_pem, binary=binary)
        assert (workdir / ".terraform/modules/network/modules/subnets/main.tf").is_file()


def _copy_snippet(page: Page) -> str:
    """Press Copy from the keyboard, then read the clipboard: what the button
    really copied."""
    page.get_by_role("button", name="Copy").focus()
    page.keyboard.press("Enter")
    # Set once the clipboard accepted the text (the label itself resets after 2.5 s).
    expect(page.locator("button.copy")).to_have_attribute("data-copied", "true")
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert isinstance(copied, str)
    assert copied == page.locator("#usage").text_content()
    return copied


def _other_pages(page: Page, site: Site) -> None:
    page.goto(site.server.url + "/providers/platform/dns")
    expect(page.locator(".module-head h1")).to_contain_text("platform/dns")
    expect(page.locator("#usage")).to_contain_text(f"{site.server.host}/platform/dns")
    expect(page.locator(".chips")).to_contain_text("darwin_arm64")
    screenshots(page, site.artifacts, "provider")
    page.goto(site.server.url + "/mirror")
    expect(page.get_by_role("heading", name="Mirror", exact=True)).to_be_visible()
    screenshots(page, site.artifacts, "mirror")
    page.goto(site.server.url + "/ui/token")
    screenshots(page, site.artifacts, "token")
    answer = page.goto(site.server.url + "/no/such/page")
    assert answer is not None and answer.status == 404
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    screenshots(page, site.artifacts, "not-found")

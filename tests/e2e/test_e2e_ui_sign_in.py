"""Web UI sign-in in a real browser: Debian's Chromium, driven by
Playwright, signs in through the real OpenID Provider (oidc-provider,
tests/support/oidc_provider.py) to a real `gitreg serve` over TLS.

alice (group platform-team, granted publish on the private namespace `team`)
signs in, sees the private module, creates a read token on the Tokens page
and reads its secret once; the real `terraform init` installs the private
module with that token, and the API answers it. She revokes it: the API then
answers 401 and `terraform init` fails. carol (admin on every namespace)
finds alice's other token on the admin page and revokes it. bob (group
`other`, no grant) signs in and sees nothing private, and has no token to
make. Screenshots, light and dark, go to the artifacts directory printed at
the start.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.support.browser import chromium_context, require_chromium, screenshots
from tests.support.gitrepo import GitRepo
from tests.support.oidc_provider import oidc_provider
from tests.support.server import RunningServer, cli, free_port, start_server
from tests.support.terraform import run_terraform

GRANTS = """
[[grants]]
group = "platform-team"
namespace = "team"
scope = "publish"

[[grants]]
group = "registry-admins"
namespace = "*"
scope = "admin"
"""


@dataclass
class Site:
    server: RunningServer
    artifacts: Path


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    require_chromium()
    data = tmp_path / "data"
    for namespace, name, words in (("acme", "network", "open"), ("team", "vault", "classified")):
        repo = GitRepo(tmp_path / f"{namespace}-{name}")
        repo.write("main.tf", f'output "greeting" {{\n  value = "{words}"\n}}\n')
        repo.write("README.md", f"# {name}\n\nThe {words} {name} module.\n")
        repo.commit("first")
        repo.tag("v1.0.0")
        cli(data, "repo", "add", str(repo.path), "--module", f"{namespace}/{name}/aws")
    cli(data, "namespace", "set", "team", "--private")
    config = tmp_path / "gitreg.toml"
    config.write_text(GRANTS)
    port = free_port()
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    print(f"\nscreenshots: {artifacts}")
    with oidc_provider(f"https://127.0.0.1:{port}/ui/sign-in/callback") as idp:
        server = start_server(data, "--config", str(config), port=port, env=idp.gitreg_env())
        try:
            yield Site(server, artifacts)
        finally:
            server.stop()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[BrowserContext]:
    with chromium_context(tmp_path / "chromium-profile") as context:
        yield context


def _sign_in(page: Page, site: Site, login: str) -> None:
    """From the header's link, through gitreg's "Sign in with ..." button (the
    link itself writes nothing), the provider's login and consent forms."""
    page.goto(site.server.url + "/")
    page.get_by_role("link", name="Sign in").click()
    page.wait_for_url(site.server.url + "/ui/sign-in?next=/")
    if login == "alice":
        screenshots(page, site.artifacts, "sign-in")
    page.get_by_role("button", name="Sign in with 127.0.0.1").click()
    page.locator("input[name=login]").fill(login)
    page.locator("input[name=password]").fill("any")
    if login == "alice":
        screenshots(page, site.artifacts, "idp-login")
    page.get_by_role("button", name="Sign-in").click()
    page.get_by_role("button", name="Continue").click()
    page.wait_for_url(site.server.url + "/")
    expect(page.locator(".who")).to_have_text(f"{login}@example.com")


def _api(site: Site, token: str) -> int:
    with httpx.Client(verify=site.server.ssl_context(), trust_env=False) as client:
        answer = client.get(
            site.server.url + "/v1/modules/team/vault/aws/versions",
            headers={"authorization": f"Bearer {token}"},
        )
    return answer.status_code


def _init(site: Site, workdir: Path, token: str) -> tuple[int, str]:
    workdir.mkdir()
    host = site.server.host
    (workdir / "main.tf").write_text(
        f'module "vault" {{\n  source  = "{host}/team/vault/aws"\n  version = "1.0.0"\n}}\n'
    )
    config = f'credentials "{host}" {{\n  token = "{token}"\n}}\n'
    result = run_terraform(
        workdir, "init", ca_pem=site.server.ca_pem, cli_config=config, check=False
    )
    return result.returncode, result.stdout + result.stderr


def test_alice_signs_in_makes_a_token_uses_it_and_revokes_it(
    site: Site, browser: BrowserContext, tmp_path: Path
) -> None:
    page = browser.new_page()
    page.goto(site.server.url + "/")
    assert "team/vault" not in page.content()
    _sign_in(page, site, "alice")
    expect(page.get_by_role("link", name="team/vault/aws")).to_be_visible()
    screenshots(page, site.artifacts, "home-signed-in")
    session = next(c for c in browser.cookies() if c["name"] == "__Host-gitreg_session")
    assert session["httpOnly"] and session["secure"] and session["sameSite"] == "Lax"
    assert "gitreg_session" not in page.evaluate("() => document.cookie")

    page.get_by_role("link", name="Tokens").click()
    expect(page.get_by_role("heading", name="Tokens", exact=True)).to_be_visible()
    screenshots(page, site.artifacts, "tokens-empty")
    page.get_by_label("Expires after").select_option("7")
    secret = _create(page, "ci: vault pipeline")
    assert re.fullmatch(r"gitreg_[A-Za-z0-9_-]{43}", secret), secret
    screenshots(page, site.artifacts, "tokens-created")
    page.goto(site.server.url + "/ui/tokens")  # shown once: not on the page again
    assert secret not in page.content() and "ci: vault pipeline" in page.content()

    assert _api(site, secret) == 200
    code, output = _init(site, tmp_path / "with-token", secret)
    assert code == 0 and "team/vault/aws 1.0.0" in output, output

    page.get_by_role("button", name="Revoke ci: vault pipeline").click()
    page.wait_for_url(site.server.url + "/ui/tokens")
    expect(page.get_by_text("You have no active tokens.")).to_be_visible()
    screenshots(page, site.artifacts, "tokens-revoked")
    assert _api(site, secret) == 401
    code, output = _init(site, tmp_path / "revoked", secret)
    assert code != 0, output

    _create(page, "ci: left behind")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(site.server.url + "/")
    assert "team/vault" not in page.content()
    expect(page.get_by_role("link", name="Sign in")).to_be_visible()
    _admin_revokes(page, site)


def _create(page: Page, name: str) -> str:
    page.get_by_label("Name").fill(name)
    page.get_by_label("team").select_option("read")
    page.get_by_role("button", name="Create token").click()
    return page.locator("#new-token").text_content() or ""


def _admin_revokes(page: Page, site: Site) -> None:
    """carol (admin on every namespace) sees alice's token under her name and
    revokes it. gitreg's sign-out does not end alice's session at the
    provider, so carol uses the browser after forgetting every cookie."""
    page.context.clear_cookies()
    _sign_in(page, site, "carol")
    page.get_by_role("link", name="Tokens").click()
    page.get_by_role("link", name="Every person's tokens").click()
    expect(page.get_by_role("heading", name="alice@example.com")).to_be_visible()
    expect(page.locator("main")).to_contain_text("ci: left behind")
    screenshots(page, site.artifacts, "admin-tokens")
    page.get_by_role("button", name="Revoke ci: left behind of alice@example.com").click()
    page.wait_for_url(site.server.url + "/ui/admin/tokens")
    expect(page.locator("main")).not_to_contain_text("ci: left behind")


def test_bob_sees_no_private_content(site: Site, browser: BrowserContext) -> None:
    page = browser.new_page()
    _sign_in(page, site, "bob")
    assert "team/vault" not in page.content()
    answer = page.goto(site.server.url + "/modules/team/vault/aws")
    assert answer is not None and answer.status == 404
    page.goto(site.server.url + "/ui/tokens")
    expect(page.get_by_role("status")).to_contain_text("grant nothing on this registry")
    screenshots(page, site.artifacts, "tokens-bob")
    answer = page.goto(site.server.url + "/ui/admin/tokens")
    assert answer is not None and answer.status == 403

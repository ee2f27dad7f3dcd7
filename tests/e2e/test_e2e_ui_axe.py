"""axe-core on every kind of page, in a real Chromium at desktop (1366 px)
and phone (390 px) widths, light and dark: no critical or serious violation.

axe-core comes from npm (tests/a11y/package.json; .ci/run installs it) and
is injected before each page's own scripts through the browser's DevTools
protocol, which the page's Content-Security-Policy does not apply to; the
policy itself stays as served. Outside CI the test is skipped when axe-core
or Chromium is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext

from tests.catalog.test_provider_docs import _ingest
from tests.providers.test_providers_forges import API, TOKEN
from tests.support.browser import chromium_context, require_chromium
from tests.support.gitrepo import GitRepo
from tests.support.provider_dist import make_dist, make_services, public_armor, publisher_key
from tests.support.readmes import network_module
from tests.support.server import RunningServer, cli, free_port, start_server

pytestmark = pytest.mark.slow

AXE = Path(__file__).resolve().parents[1] / "a11y/node_modules/axe-core/axe.min.js"
PAGES = (
    "/",
    "/search?q=net",
    "/search?q=net&examples=1&sort=recent",
    "/modules/platform",
    "/modules/platform/net/aws",
    "/modules/platform/net/aws?tab=inputs",
    "/modules/platform/net/aws?tab=dependencies",
    "/modules/platform/net/aws?tab=submodules",
    "/modules/platform/net/aws/1.0.0/modules/subnets",
    "/modules/platform/net/aws/1.0.0/examples/complete",
    "/modules/platform/net/aws/1.0.0/files/main.tf",
    "/modules/platform/net/aws/1.0.0/files/docs/design.md",
    "/providers/platform/dns",
    "/providers/acme/null",
    "/providers/acme/null/1.0.0/docs/resources-resource",
    "/mirror",
    "/ui/token",
    "/no/such/page",
)


def _require_axe() -> None:
    if AXE.is_file():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{AXE} is missing: .ci/run installs tests/a11y with npm ci")
    pytest.skip("axe-core is not installed (cd tests/a11y && npm ci)")


@dataclass
class Site:
    server: RunningServer


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    require_chromium()
    _require_axe()
    data = tmp_path / "data"
    data.mkdir()
    (data / "gitreg.toml").write_text(
        f'[forges.ghe]\nkind = "github"\napi_url = "{API}"\ntoken = "{TOKEN}"\n'
    )
    svc = make_services(data)
    svc.provider_publisher.keys.add("acme", public_armor(publisher_key()))
    _ingest(svc, tmp_path)  # acme/null with its documentation pages
    svc.close()
    port = free_port()
    repo = GitRepo(tmp_path / "terraform-aws-net")
    network_module(repo, f"127.0.0.1:{port}")
    repo.commit("first")
    repo.tag("v1.0.0")
    cli(data, "repo", "add", str(repo.path), "--module", "platform/net/aws")
    cli(data, "key", "generate", "platform")
    dist = make_dist("dns", "0.4.1", ["linux_amd64"], b"not a real binary")
    del dist.files[dist.shasums_name]
    directory = str(dist.write(tmp_path / "dist"))
    cli(data, "provider", "publish", "platform/dns", "0.4.1", directory, "--sign")
    server = start_server(data, "--reconcile-interval", "0", port=port)
    try:
        yield Site(server)
    finally:
        server.stop()


@pytest.fixture
def browser(site: Site, tmp_path: Path) -> Iterator[BrowserContext]:
    with chromium_context(tmp_path / "chromium-profile") as context:
        context.add_init_script(path=str(AXE))
        yield context


def _serious(violations: list[dict[str, Any]]) -> list[str]:
    return [
        f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:3]}"
        for v in violations
        if v["impact"] in ("critical", "serious")
    ]


def test_no_critical_or_serious_violation_on_any_page(site: Site, browser: BrowserContext) -> None:
    page = browser.new_page()
    # The scanner works: an image without a text alternative is critical.
    page.goto(site.server.url + "/no/such/page")
    page.set_content('<html lang="en"><title>t</title><main><img src="x.png"></main></html>')
    probe = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    assert any(v["id"] == "image-alt" for v in probe["violations"])
    found: dict[str, list[str]] = {}
    moderate: set[str] = set()
    for width, height in ((1366, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            for path in PAGES:
                page.goto(site.server.url + path)
                result = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
                bad = _serious(result["violations"])
                if bad:
                    found[f"{path} {width}px {scheme}"] = bad
                moderate |= {f"{path}: {v['id']}" for v in result["violations"]}
    print("\nminor and moderate:", sorted(moderate))
    assert found == {}

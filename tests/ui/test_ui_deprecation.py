"""The module page on a deprecated version: a banner with the reason
and link, and the version marked in the picker and the Versions tab; markup in
the reason or link is shown as text, never run."""

from __future__ import annotations

import re
from html import unescape

from gitreg.modules.cli import module_deprecate, module_undeprecate
from tests.ui.conftest import Ui
from tests.ui.test_ui_xss import assert_inert

REASON = 'Use 1.1: <script>alert(1)</script><img src=x onerror=alert(1)> "quoted" & more'
LINK = 'https://docs.example.com/vpc?a=1&b="><svg/onload=alert(1)>'


def _banner(html: str) -> str:
    found = re.search(r'<p class="notice deprecation" role="status">(.*?)</p>', html, re.S)
    assert found, html
    return found.group(1)


def test_a_deprecated_version_shows_a_banner_and_is_marked(ui: Ui) -> None:
    assert module_deprecate(ui.svc, "acme/vpc/aws", "1.0.0", REASON, LINK) == 0
    pages = [f"/modules/acme/vpc/aws/1.0.0?tab={t}" for t in ("readme", "versions")]
    pages += ["/modules/acme/vpc/aws", "/modules/acme/vpc/aws?tab=versions", "/modules/acme", "/"]
    for path in pages:
        page = ui.client.get(path)
        assert page.status_code == 200, path
        assert_inert(page.text, path)
    old = ui.client.get("/modules/acme/vpc/aws/1.0.0").text
    banner = _banner(old)
    assert "Version 1.0.0 is deprecated." in banner
    assert unescape(re.sub(r"<a .*?</a>|<[^>]+>", "", banner)).strip().endswith(REASON)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in banner  # shown as text
    more = r'<a href="([^"]*)" rel="noopener noreferrer">More information</a>'
    (href,) = re.findall(more, banner)
    assert unescape(href) == LINK
    assert '<option value="1.0.0" data-href="/modules/acme/vpc/aws/1.0.0" selected>' in old
    assert "1.0.0 (deprecated)</option>" in old and "1.1.0 (latest)</option>" in old
    versions_tab = re.search(r'id="panel-versions".*?</section>', old, re.S)
    assert versions_tab is not None
    items = re.findall(r"<li>(.*?)</li>", versions_tab.group(0))
    assert [("1.0.0" in i, "deprecated" in i) for i in items] == [(False, False), (True, True)]
    latest = ui.client.get("/modules/acme/vpc/aws").text
    assert 'class="notice deprecation"' not in latest  # 1.1.0 is not deprecated
    assert "1.0.0 (deprecated)</option>" in latest

    assert module_undeprecate(ui.svc, "acme/vpc/aws", "1.0.0") == 0
    lifted = ui.client.get("/modules/acme/vpc/aws/1.0.0").text
    assert 'class="notice deprecation"' not in lifted and "(deprecated)" not in lifted
    assert 'badge warn">deprecated' not in lifted


def test_the_banner_without_a_link(ui: Ui) -> None:
    assert module_deprecate(ui.svc, "acme/vpc/aws", "1.1.0", "Superseded by acme/net", "") == 0
    banner = _banner(ui.client.get("/modules/acme/vpc/aws").text)
    assert "Superseded by acme/net" in banner and "<a " not in banner

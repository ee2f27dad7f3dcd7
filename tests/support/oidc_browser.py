"""A browser for the sign-in tests: follows gitreg's authorization URL to the
identity provider, fills in oidc-provider's login and consent forms, and
follows the redirects back through gitreg to the loopback `redirect_uri`.

Used in-process (`sign_in`) by the protocol tests, which stop at the loopback
URL, and as the `BROWSER` (and `xdg-open`) of `terraform login`, which must
reach Terraform's listener: `python -m tests.support.oidc_browser URL`, with
GITREG_TEST_LOGIN (the person) and GITREG_TEST_CA (gitreg's CA) set.
"""

from __future__ import annotations

import os
import ssl
import sys
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx


class _Form(HTMLParser):
    """The first form of a page: its action and its named inputs' values."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}
        self._done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "form" and self.action is None:
            self.action = values.get("action", "")
        elif tag == "input" and self.action is not None and not self._done and "name" in values:
            self.fields[values["name"]] = values.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._done = True


def is_loopback_login(url: str) -> bool:
    parts = urlsplit(url)
    local = parts.scheme == "http" and parts.hostname in ("localhost", "127.0.0.1")
    return local and parts.path == "/login" and 10000 <= (parts.port or 0) <= 10010


@dataclass(frozen=True)
class Visit:
    """Where the browser ended: the loopback URL it was sent to (status 0), or
    the page it stopped at."""

    url: str
    status: int = 0
    text: str = ""


def browse(
    url: str,
    login: str,
    ca_pem: Path | None,
    deliver: bool = False,
    until: Callable[[str], bool] = is_loopback_login,
) -> Visit:
    """Follow `url` through the sign-in until a redirect to an address `until`
    accepts; with `deliver`, that address is visited too (Terraform's listener).
    The web UI's tests stop at gitreg's own callback and deliver it themselves."""
    verify = ssl.create_default_context(cafile=str(ca_pem)) if ca_pem else True
    with httpx.Client(verify=verify, trust_env=False, timeout=30) as client:
        response = client.get(url)
        for _ in range(20):
            if response.is_redirect:
                target = urljoin(str(response.url), response.headers["location"])
                if until(target):
                    if deliver:
                        client.get(target)
                    return Visit(target)
                response = client.get(target)
                continue
            form = _Form()
            form.feed(response.text)
            if response.status_code != 200 or form.action is None:
                return Visit(str(response.url), response.status_code, response.text)
            if "login" in form.fields:
                form.fields.update(login=login, password="any")  # devInteractions: any password
            response = client.post(urljoin(str(response.url), form.action), data=form.fields)
    raise AssertionError(f"sign-in at {url} did not finish")


def sign_in(url: str, login: str, ca_pem: Path) -> str:
    """The loopback URL the sign-in ends at; fails when it stops at a page."""
    visit = browse(url, login, ca_pem)
    assert visit.status == 0, f"stopped at {visit.url} ({visit.status}): {visit.text[:500]}"
    return visit.url


def main() -> int:
    url = sys.argv[-1]
    ca = Path(os.environ["GITREG_TEST_CA"])
    visit = browse(url, os.environ.get("GITREG_TEST_LOGIN", "alice"), ca, deliver=True)
    print(f"ended at {visit.url} status={visit.status}\n{visit.text}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Headless Chromium for the web UI's tests: Debian's /usr/bin/chromium driven
by Playwright (no browser download: the machine's network is closed), a fresh
profile per test, and the flags this machine needs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
# The closed network makes Chromium hang on its background services.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def require_chromium() -> None:
    """Skip without Chromium, except in CI, where .ci/run installs it: there
    a missing browser is a failure, never a silent skip."""
    if CHROMIUM.exists():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium package")
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")


@contextmanager
def chromium_context(profile: Path) -> Iterator[BrowserContext]:
    """A browser with a fresh profile in `profile`. gitreg's local CA is not in
    Chromium's store, so only the browser skips the certificate check (the
    tests' terraform and httpx verify it through SSL_CERT_FILE)."""
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            ignore_https_errors=True,
            viewport={"width": 1280, "height": 900},
        )
        context.set_default_timeout(30_000)
        try:
            yield context
        finally:
            context.close()


def screenshots(page: Page, directory: Path, name: str) -> None:
    """The whole page, light and dark, as `directory`/NAME-light.png and -dark.png."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.screenshot(path=str(directory / f"{name}-{scheme}.png"), full_page=True)
    page.emulate_media(color_scheme="light")

"""Pages are gzipped for browsers that ask; /favicon.ico is an icon."""

from __future__ import annotations

import gzip

from tests.ui.conftest import Ui


def test_pages_are_gzipped_when_asked_for(ui: Ui) -> None:
    plain = ui.client.get("/modules/acme/vpc/aws", headers={"accept-encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert "Accept-Encoding" in plain.headers["vary"] and "Cookie" in plain.headers["vary"]
    for _ in range(2):  # gzipped once, then served from the page cache
        packed = ui.client.get(
            "/modules/acme/vpc/aws", headers={"accept-encoding": "gzip, deflate, br"}
        )
        assert packed.headers["content-encoding"] == "gzip"
        assert packed.content == plain.content  # httpx undoes the encoding
        assert int(packed.headers["content-length"]) < len(plain.content) / 2
        assert len(gzip.compress(plain.content)) >= int(packed.headers["content-length"]) - 64
    refused = ui.client.get("/", headers={"accept-encoding": "br, gzip;q=0"})
    assert "content-encoding" not in refused.headers


def test_favicon(ui: Ui) -> None:
    moved = ui.client.get("/favicon.ico")
    assert moved.status_code == 301
    icon = ui.client.get(moved.headers["location"])
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert icon.headers["x-content-type-options"] == "nosniff"
    assert icon.content.startswith(b"<svg") and b"<script" not in icon.content
    assert moved.headers["location"] in ui.client.get("/").text


def test_static_files_are_gzipped_when_asked_for(ui: Ui) -> None:
    page = ui.client.get("/").text
    for name in ("style.css", "ui.js"):
        marker = f"/{name}"
        url = next(p for p in page.split('"') if p.startswith("/ui/static/") and p.endswith(marker))
        packed = ui.client.get(url, headers={"accept-encoding": "gzip"})
        assert packed.headers["content-encoding"] == "gzip", name
        assert packed.headers["cache-control"].endswith("immutable")
        plain = ui.client.get(url, headers={"accept-encoding": "identity"})
        assert packed.content == plain.content and "content-encoding" not in plain.headers

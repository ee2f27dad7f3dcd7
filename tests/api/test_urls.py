"""Download URLs: public_url first; forwarded headers only when trusted."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.requests import Request

from gitreg.api import urls
from gitreg.api.urls import base_url
from gitreg.settings import load_settings


def _request(headers: dict[str, str], scheme: str = "http") -> Request:
    scope = {
        "type": "http",
        "method": "GET",
        "scheme": scheme,
        "path": "/",
        "query_string": b"",
        "server": ("127.0.0.1", 8080),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    return Request(scope)


FORWARDED = {
    "host": "127.0.0.1:8080",
    "x-forwarded-proto": "https",
    "x-forwarded-host": "registry.example.com",
}


def test_public_url_wins(tmp_path: Path) -> None:
    settings = load_settings(
        {"data_dir": tmp_path, "public_url": "https://reg.example.com/"}, environ={}
    )
    assert base_url(_request(FORWARDED), settings) == "https://reg.example.com"


def test_forwarded_headers_ignored_unless_trusted(tmp_path: Path) -> None:
    settings = load_settings({"data_dir": tmp_path}, environ={})
    assert base_url(_request(FORWARDED), settings) == "http://127.0.0.1:8080"


def test_forwarded_headers_used_when_trusted(tmp_path: Path) -> None:
    settings = load_settings({"data_dir": tmp_path, "trust_forwarded": True}, environ={})
    assert base_url(_request(FORWARDED), settings) == "https://registry.example.com"


@pytest.mark.parametrize("host", ["evil.example.com/path?x", "a b", "x" * 400, ""])
def test_malformed_host_header_falls_back_to_configured_address(tmp_path: Path, host: str) -> None:
    settings = load_settings({"data_dir": tmp_path, "port": 9443}, environ={})
    assert base_url(_request({"host": host}, "https"), settings) == "https://127.0.0.1:9443"


def test_made_up_hosts_cannot_keep_the_real_host_out_of_the_cache(tmp_path: Path) -> None:
    """The per-Host cache is bounded, and a client sending many Host values
    neither grows it past its bound nor keeps the real host from being cached."""
    settings = load_settings({"data_dir": tmp_path}, environ={})
    for n in range(2 * urls._MAX_BASES):
        assert base_url(_request({"host": f"made-up-{n}.example"}), settings).endswith(".example")
        assert len(urls._bases) <= urls._MAX_BASES
    assert base_url(_request({"host": "registry.example.com"}), settings) == (
        "http://registry.example.com"
    )
    assert ("http", b"registry.example.com") in urls._bases

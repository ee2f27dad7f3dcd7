"""Units of the web sign-in flow (gitreg/auth/web_sign_in.py) that need no provider."""

from __future__ import annotations

import pytest

from gitreg.auth.web_sign_in import safe_next


@pytest.mark.parametrize(
    ("asked", "kept"),
    [
        ("/", "/"),
        ("/modules/platform/vpc/aws?tab=inputs", "/modules/platform/vpc/aws?tab=inputs"),
        ("//evil.example/", "/"),  # scheme-relative: another host
        ("/\\evil.example", "/"),  # browsers read a backslash as a slash
        ("https://evil.example/", "/"),
        ("javascript:alert(1)", "/"),
        ("/a\r\nSet-Cookie: x=y", "/"),  # no control characters into a header
        ("/ space", "/"),
        ("/" + "a" * 600, "/"),
        ("", "/"),
    ],
)
def test_only_paths_on_this_site_are_returned_to(asked: str, kept: str) -> None:
    assert safe_next(asked) == kept

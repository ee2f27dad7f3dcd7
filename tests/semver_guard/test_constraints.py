"""Version constraints compared by the released versions they allow."""

from __future__ import annotations

import pytest

from gitreg.semver_guard.constraints import relation


@pytest.mark.parametrize(
    ("old", "new", "found", "example"),
    [
        ("~> 5.0", "~> 5.0", "same", ""),
        (">=1.0", ">= 1.0", "same", ""),
        (">= 1.0, < 2.0", "~> 1.0", "same", ""),
        ("~> 5.0", ">= 5.0", "wider", "6.0.0 is now allowed"),
        (">= 1.5", ">= 1.3", "wider", "1.3.0 is now allowed"),
        ("~> 1.2.0", "~> 1.2", "wider", "1.3.0 is now allowed"),
        (">= 4.0, < 6.0", ">= 4.0", "wider", "6.0.0 is now allowed"),
        ("= 1.2.3", ">= 1.2.3", "wider", "1.2.4 is now allowed"),
        ("", ">= 1.0", "narrower", "0.0.0 is no longer allowed"),
        (">= 5.0", "~> 5.0", "narrower", "6.0.0 is no longer allowed"),
        ("~> 5.0", "~> 5.20", "narrower", "5.0.0 is no longer allowed"),
        (">= 1.0", ">= 1.0, != 1.4.0", "narrower", "1.4.0 is no longer allowed"),
        ("~> 4.0", "~> 5.0", "both", "4.0.0 is no longer allowed"),
        ("~> 5.0", "not a constraint", "unsure", ""),
    ],
)
def test_relation(old: str, new: str, found: str, example: str) -> None:
    assert relation(old, new) == (found, example)

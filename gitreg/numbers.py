"""Decimal numbers from untrusted text (query strings, headers, settings).

`str.isdigit()` alone accepts "²" and other Unicode digits that `int()`
refuses, and `int()` refuses more than 4,300 digits: either way a ValueError,
which on a request path is a 500. Every caller takes plain ASCII digits of a
bounded length, or nothing.
"""

from __future__ import annotations


def plain_int(text: str, max_digits: int = 12) -> int | None:
    """`text` as a non-negative integer, or None unless it is 1 to
    `max_digits` ASCII digits."""
    if not (0 < len(text) <= max_digits and text.isascii() and text.isdigit()):
        return None
    return int(text)


def declared_length(text: str) -> int | None:
    """A Content-Length header's value, or None when absent or not plain ASCII
    digits. More than 18 digits is larger than any limit gitreg sets, so it is
    answered as 10**18 rather than parsed (int() of a 5,000-digit string raises)."""
    if not (text.isascii() and text.isdigit()):
        return None
    return int(text) if len(text) <= 18 else 10**18

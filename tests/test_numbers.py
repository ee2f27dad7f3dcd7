"""Numbers from untrusted text (gitreg/numbers.py): never a ValueError."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gitreg.numbers import declared_length, plain_int


def test_plain_int_takes_only_bounded_ascii_digits() -> None:
    assert plain_int("42") == 42
    assert plain_int("") is None
    assert plain_int("²") is None
    assert plain_int("-1") is None
    assert plain_int("1" * 13) is None
    assert plain_int("1" * 13, max_digits=13) == int("1" * 13)


def test_declared_length_reads_a_content_length_or_nothing() -> None:
    assert declared_length("1024") == 1024
    assert declared_length("") is None
    assert declared_length("12a") is None
    assert declared_length("٣") is None  # an Arabic-Indic digit: isdigit() but not ASCII


def test_a_huge_declared_length_is_larger_than_any_limit_and_does_not_raise() -> None:
    assert declared_length("9" * 5_000) == 10**18
    assert declared_length("9" * 18) == int("9" * 18)


@given(st.text(max_size=6_000))
def test_any_header_text_gives_a_length_or_none(text: str) -> None:
    found = declared_length(text)
    assert found is None or found >= 0

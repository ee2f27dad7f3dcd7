"""Type constraints: read from their text, compared by what they accept."""

from __future__ import annotations

import pytest

from gitreg.semver_guard.types import ANY, parse_type, widening


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("string", "string"),
        ("", "any"),
        ('"string"', "string"),  # Terraform 0.11
        ("list", "list(any)"),
        ("map", "map(any)"),
        ("list(string)", "list(string)"),
        ("set( number )", "set(number)"),
        ("map(list(bool))", "map(list(bool))"),
        ("tuple([string, number])", "tuple([string, number])"),
        ("object({b = string, a = number})", "object({a = number, b = string})"),
        ('object({"quoted" = string})', "object({quoted = string})"),
        (
            "object({size = optional(number, 5), tags = optional(map(string), {})})",
            "object({size = optional(number, 5), tags = optional(map(string), {})})",
        ),
        (
            'object({x = optional(list(string), ["a", "b"]), y = optional(bool)})',
            'object({x = optional(list(string), ["a", "b"]), y = optional(bool)})',
        ),
        (
            "list(object({name = string, rules = list(object({port = number}))}))",
            "list(object({name = string, rules = list(object({port = number}))}))",
        ),
    ],
)
def test_reads_type_constraints(text: str, shown: str) -> None:
    found = parse_type(text)
    assert found is not None and str(found) == shown


@pytest.mark.parametrize(
    "text",
    ["var.x", "list(string", "object({a = string, a = number})", "optional(string)", "foo(bar)"],
)
def test_refuses_what_is_not_a_type_constraint(text: str) -> None:
    assert parse_type(text) is None


CASES = [
    # (old, new, verdict, a reason that must be given)
    ("string", "string", "same", None),
    ("string", "number", "narrower", "string became number"),
    ("number", "string", "wider", "number became string"),
    ("bool", "string", "wider", "bool became string"),
    ("bool", "number", "narrower", "bool became number"),
    ("string", "any", "wider", "became any"),
    ("", "string", "narrower", "any became string"),
    ("any", "list(string)", "narrower", "any became list(string)"),
    ("string", "list(string)", "narrower", "string became list(string)"),
    ("list(string)", "list(number)", "narrower", "[*]: string became number"),
    ("list(number)", "list(string)", "wider", "[*]: number became string"),
    ("map(string)", "map(any)", "wider", "[*]: string became any"),
    ("set(string)", "set(number)", "narrower", "[*]: string became number"),
    ("list(string)", "set(string)", "unsure", "list(string) became set(string)"),
    ("set(string)", "list(string)", "unsure", "set(string) became list(string)"),
    ("map(string)", "object({a = string})", "unsure", "map(string) became object"),
    ("object({a = string})", "map(string)", "unsure", "became map(string)"),
    ("list(string)", "tuple([string])", "unsure", "became tuple"),
    ("tuple([string, number])", "tuple([string])", "narrower", "2 elements became one of 1"),
    ("tuple([string, number])", "tuple([string, string])", "wider", "[1]: number became string"),
    (
        "object({a = string, b = number})",
        "object({a = string})",
        "narrower",
        ".b: attribute removed",
    ),
    (
        "object({a = string})",
        "object({a = string, b = number})",
        "narrower",
        ".b: required attribute added",
    ),
    (
        "object({a = string})",
        "object({a = string, b = optional(number)})",
        "wider",
        ".b: optional attribute added",
    ),
    (
        "object({a = optional(string)})",
        "object({a = string})",
        "narrower",
        ".a: attribute made required",
    ),
    (
        "object({a = string})",
        "object({a = optional(string)})",
        "wider",
        ".a: attribute made optional",
    ),
    (
        "object({a = optional(number, 1)})",
        "object({a = optional(number, 2)})",
        "changed",
        ".a: default 1 became 2",
    ),
    (
        "object({a = optional(number)})",
        "object({a = optional(string)})",
        "wider",
        ".a: number became string",
    ),
    (
        "object({a = optional(string)})",
        "object({a = optional(number)})",
        "narrower",
        ".a: string became number",
    ),
    (
        "list(object({name = string, rules = list(object({port = number}))}))",
        "list(object({name = string, rules = list(object({port = number, proto = string}))}))",
        "narrower",
        "[*].rules[*].proto: required attribute added",
    ),
    (
        "map(object({size = optional(number, 5)}))",
        "map(object({size = optional(number, 5), tags = optional(map(string), {})}))",
        "wider",
        "[*].tags: optional attribute added",
    ),
    ("object({a=string,b=number})", "object({ b = number, a = string })", "same", None),
]


@pytest.mark.parametrize(("old", "new", "verdict", "reason"), CASES)
def test_widening(old: str, new: str, verdict: str, reason: str | None) -> None:
    before, after = parse_type(old), parse_type(new)
    assert before is not None and after is not None
    found = widening(before, after)
    assert found.verdict == verdict, found.reasons
    if reason is not None:
        assert any(reason in r for _, r in found.reasons), found.reasons
    else:
        assert found.reasons == []


def test_an_attribute_removed_and_another_added_reports_both() -> None:
    before = parse_type("object({a = string})")
    after = parse_type("object({b = optional(string)})")
    assert before is not None and after is not None
    found = widening(before, after)
    assert found.verdict == "narrower"
    assert [r for _, r in found.reasons] == [
        ".a: attribute removed",
        ".b: optional attribute added",
    ]


def test_no_type_is_any() -> None:
    assert parse_type("") == ANY

"""Version constraints resolve exactly as Terraform resolves provider constraints.

The cases follow go-versions' own tests (MeetingConstraints, the Ruby-style
parser) and Terraform's documented prerelease rule; see
gitreg/versions.py for the sources.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitreg.errors import ConstraintError
from gitreg.versions import Constraints, parse_constraints, parse_version, select

AVAILABLE = [
    parse_version(v)
    for v in (
        "0.9.0",
        "1.0.0",
        "1.0.4",
        "1.0.10",
        "1.1.0",
        "1.2.0",
        "1.2.5",
        "2.0.0-beta1",
        "2.0.0",
        "2.1.0-rc1",
        "2.1.0",
        "3.0.0-alpha",
    )
]


def newest(constraint: str) -> str | None:
    chosen = parse_constraints(constraint).newest(AVAILABLE)
    return str(chosen) if chosen else None


@pytest.mark.parametrize(
    ("constraint", "expected"),
    [
        # ~> with three parts: only the patch may grow.
        ("~> 1.0.4", "1.0.10"),
        ("~> 1.2.0", "1.2.5"),
        # ~> with two or one parts: the minor may grow, not the major.
        ("~> 1.0", "1.2.5"),
        ("~> 1.1", "1.2.5"),
        ("~> 1", "1.2.5"),
        ("~> 2.0", "2.1.0"),
        ("~>1.1", "1.2.5"),  # no space is fine
        # comparisons; missing parts are zeros, not wildcards
        (">= 1.0", "2.1.0"),
        (">= 2.1", "2.1.0"),
        ("> 1.2", "2.1.0"),
        ("> 2.1", None),
        ("< 2", "1.2.5"),
        ("<= 1.2", "1.2.0"),
        ("<= 1.2.5", "1.2.5"),
        # exact, with or without `=`; `1.2` means exactly 1.2.0
        ("1.1.0", "1.1.0"),
        ("= 1.0.4", "1.0.4"),
        ("1.2", "1.2.0"),
        ("=1.0.10", "1.0.10"),
        ("1.3.0", None),
        # intersections
        (">= 1.0, < 2.0", "1.2.5"),
        (">= 1.0, != 2.1.0", "2.0.0"),
        ("~> 1.0, != 1.2.5", "1.2.0"),
        ("~> 1.0.0, ~> 1.0", "1.0.10"),
        ("1.0.0, 2.0.0", None),
        # prereleases only when named exactly
        (">= 2.0.0-beta1", "2.1.0"),
        ("2.0.0-beta1", "2.0.0-beta1"),
        ("= 2.1.0-rc1", "2.1.0-rc1"),
        ("~> 2.1.0-rc1", "2.1.0"),
        ("> 2.1.0", None),  # 3.0.0-alpha is newer but never selected by >
        ("3.0.0-alpha, >= 3.0.0-alpha", "3.0.0-alpha"),
        ("2.1.0-rc1, < 2.1.0-rc1", None),
    ],
)
def test_selects_like_terraform(constraint: str, expected: str | None) -> None:
    assert newest(constraint) == expected


def test_no_constraint_means_newest_release() -> None:
    assert str(Constraints().newest(AVAILABLE)) == "2.1.0"


def test_constraints_of_several_modules_intersect() -> None:
    merged = (
        parse_constraints(">= 1.0") & parse_constraints("~> 1.1") & parse_constraints("< 1.2.5")
    )
    assert str(merged.newest(AVAILABLE)) == "1.2.0"


def test_exact_match_includes_build_metadata() -> None:
    built = [parse_version("1.0.0+abc")]
    assert parse_constraints("1.0.0").newest(built) is None
    assert str(parse_constraints("1.0.0+abc").newest(built)) == "1.0.0+abc"
    assert str(parse_constraints(">= 1.0.0").newest(built)) == "1.0.0+abc"


def test_lock_file_version_wins_while_it_meets_the_constraints() -> None:
    wanted = parse_constraints("~> 1.0")
    assert str(select(AVAILABLE, wanted, parse_version("1.0.4"))) == "1.0.4"
    assert str(select(AVAILABLE, wanted, parse_version("2.0.0"))) == "1.2.5"


def test_semver_precedence_for_prereleases() -> None:
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2"]
    ordered += ["1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"]
    parsed = [parse_version(v) for v in ordered]
    assert sorted(reversed(parsed)) == parsed


@pytest.mark.parametrize(
    ("constraint", "message"),
    [
        ("v1.0", '"v" prefix'),
        ("1.0.0.0", "too many numbered portions"),
        (">=", "malformed"),
        ("", "malformed"),
        ("1.x", "malformed"),
        ("1.*", "malformed"),
        ("=> 1.0", "malformed"),
        ("=< 1.0", "malformed"),
        ("~>  1.0", "only one space"),
        ("1.0,", "malformed"),
        ("1.0,,2.0", "malformed"),
        ("1.0 2.0", "malformed"),
        ("^1.0", "malformed"),
        ("~1.0", "malformed"),
        ("1.0.0beta", "invalid characters"),
        ("1.0.0-be_ta", "malformed"),
        ("latest", "malformed"),
    ],
)
def test_refuses_what_terraform_refuses(constraint: str, message: str) -> None:
    with pytest.raises(ConstraintError, match=message):
        parse_constraints(constraint)


@pytest.mark.parametrize("text", ["1.0", "v1.0.0", "01.0.0", "1.0.0-", "1.0.0+", " 1.0.0"])
def test_upstream_versions_must_be_strict_semver(text: str) -> None:
    with pytest.raises(ConstraintError):
        parse_version(text)


def test_canonical_string_round_trips() -> None:
    text = ">= 1.2.0, ~> 1.2, != 1.3.1, ~> 1.2.4"
    assert str(parse_constraints(text)) == text


@given(st.text(max_size=60))
def test_arbitrary_text_parses_or_is_refused_cleanly(text: str) -> None:
    try:
        parsed = parse_constraints(text)
    except ConstraintError:
        return
    parsed.newest(AVAILABLE)

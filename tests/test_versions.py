"""Tags to versions."""

from __future__ import annotations

import pytest

from gitreg.errors import NotAVersion
from gitreg.versions import latest, parse_version, sort_key, unsafe_ref_reason, version_from_tag


@pytest.mark.parametrize(
    ("tag", "version"),
    [
        ("v1.0.0", "1.0.0"),
        ("1.0.0", "1.0.0"),
        ("V2.3.4", "2.3.4"),
        ("v2.0.0-rc1", "2.0.0-rc1"),
        ("1.2.3-alpha.1+build.5", "1.2.3-alpha.1+build.5"),
    ],
)
def test_semver_tags_become_versions(tag: str, version: str) -> None:
    assert version_from_tag(tag).version == version


def test_build_metadata_is_not_part_of_the_key() -> None:
    assert version_from_tag("v1.0.0+a").key == version_from_tag("1.0.0+b").key == "1.0.0"


@pytest.mark.parametrize(
    "tag", ["not-a-version", "v1", "v1.0", "1.0.0.0", "release-1.0.0", "v01.0.0", "vv1.0.0", ""]
)
def test_other_tags_are_not_versions(tag: str) -> None:
    with pytest.raises(NotAVersion):
        version_from_tag(tag)


def test_prefix_is_stripped_before_parsing() -> None:
    assert version_from_tag("vpc/v1.2.0", "vpc/").version == "1.2.0"
    assert version_from_tag("vpc-1.2.0", "vpc-").version == "1.2.0"


def test_tag_without_the_prefix_is_ignored_with_a_reason() -> None:
    with pytest.raises(NotAVersion, match="prefix"):
        version_from_tag("v1.2.0", "vpc/")


@pytest.mark.parametrize(
    ("tag", "reason"),
    [
        ("v1.0.0/../x", "'..'"),
        ("-v1.0.0", "'-'"),
        ("v1.0.0\n", "control"),
        ("v1.0.0\x1b", "control"),
        ("x" * 300, "longer"),
    ],
)
def test_hostile_ref_names_are_refused_before_parsing(tag: str, reason: str) -> None:
    found = unsafe_ref_reason(tag)
    assert found is not None and reason in found
    with pytest.raises(NotAVersion):
        version_from_tag(tag)


@pytest.mark.parametrize("text", ["1.0.0\n", "1.0.\u0663", "v1.0.0"])
def test_strict_versions_are_ascii_with_nothing_after_them(text: str) -> None:
    with pytest.raises(NotAVersion):
        parse_version(text)


def test_versions_sort_by_semver_precedence() -> None:
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0", "1.10.0"]
    assert sorted(reversed(ordered), key=sort_key) == ordered


@pytest.mark.parametrize(
    ("versions", "yanked", "expected"),
    [
        (["1.2.0", "2.0.0-rc1", "1.3.0", "1.10.0-beta"], set(), "1.3.0"),
        (["1.2.0", "1.3.0", "2.0.0-rc1"], {"1.3.0"}, "1.2.0"),
        (["0.1.0-alpha", "0.1.0-beta.2", "0.1.0-beta.11"], set(), "0.1.0-beta.11"),
        (["1.0.0", "2.0.0-rc1", "2.0.0-rc2"], {"1.0.0", "2.0.0-rc2"}, "2.0.0-rc1"),
        (["1.0.0", "1.1.0-rc1"], {"1.0.0", "1.1.0-rc1"}, None),
        (["1.0.0+build.1", "1.0.1", "v2.0.0"], set(), "1.0.1"),  # one that does not parse
        ([], set(), None),
    ],
)
def test_the_latest_is_the_highest_release_else_the_highest_prerelease(
    versions: list[str], yanked: set[str], expected: str | None
) -> None:
    assert latest(versions, str, lambda v: v in yanked) == expected

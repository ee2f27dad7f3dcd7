"""go-getter locations the proxy accepts, and the ones it refuses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitreg.errors import UpstreamError
from gitreg.module_proxy.source import ArchiveSource, GitSource, parse_source


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        (
            "git::https://github.com/terraform-aws-modules/terraform-aws-vpc?ref=v5.1.0",
            GitSource("https://github.com/terraform-aws-modules/terraform-aws-vpc", "v5.1.0", ""),
        ),
        (
            "git::https://example.com/org/repo.git//modules/vpc?ref=v1&depth=1",
            GitSource("https://example.com/org/repo.git", "v1", "modules/vpc"),
        ),
        (
            "github.com/hashicorp/example?ref=v1.0.0",
            GitSource("https://github.com/hashicorp/example.git", "v1.0.0", ""),
        ),
        ("https://example.com/org/repo.git", GitSource("https://example.com/org/repo.git", "", "")),
        (
            "https://example.com/m/vpc.tar.gz//sub",
            ArchiveSource("https://example.com/m/vpc.tar.gz", "tar.gz", "sub"),
        ),
        (
            "https://example.com/get?archive=zip&token=x",
            ArchiveSource("https://example.com/get?token=x", "zip", ""),
        ),
    ],
)
def test_accepted_locations(location: str, expected: GitSource | ArchiveSource) -> None:
    assert parse_source(location) == expected


@pytest.mark.parametrize(
    ("location", "reason"),
    [
        ("s3::https://s3.amazonaws.com/bucket/vpc.zip", "s3:: getter is not supported"),
        ("gcs::https://www.googleapis.com/storage/v1/b/m.zip", "gcs:: getter"),
        ("hg::https://example.com/repo", "hg:: getter"),
        ("file:///srv/modules/vpc", "local paths and file:// are refused"),
        ("./modules/vpc", "local paths and file:// are refused"),
        ("git::file:///srv/repo.git?ref=v1", "local paths and file:// are refused"),
        ("git::ssh://git@github.com/org/repo.git?ref=v1", "only https"),
        ("git::http://example.com/org/repo.git?ref=v1", "only https"),
        ("git::https://user:pw@example.com/org/repo.git", "no credentials"),
        ("git::https://169.254.169.254/x.git?ref=v1", "refused address"),
        ("git::https://[::ffff:169.254.169.254]/x.git?ref=v1", "refused address"),
        ("git::https://0xa9fea9fe/x.git?ref=v1", "refused address"),
        ("git::https://example.com/x.git?ref=v1&sshkey=abc", "sshkey"),
        ("git::https://example.com/x.git?ref=--upload-pack=sh", "ref is not a plain"),
        ("git::https://example.com/x.git//../etc?ref=v1", "plain relative path"),
        ("https://example.com/m.rar", "not a git repository or a known archive"),
        ("https://example.com/get?archive=rar", "archive type 'rar'"),
    ],
)
def test_refused_locations_say_why(location: str, reason: str) -> None:
    with pytest.raises(UpstreamError, match="refused") as caught:
        parse_source(location)
    assert reason in str(caught.value)


@given(
    st.one_of(
        st.text(max_size=300),
        st.text(max_size=200).map(lambda t: "git::https://" + t),
        st.text(max_size=200).map(lambda t: "https://example.com/" + t),
        st.text(max_size=200).map(lambda t: "github.com/" + t),
    )
)
def test_any_location_is_accepted_or_refused_never_crashes(location: str) -> None:
    try:
        found = parse_source(location)
    except UpstreamError as exc:
        assert "refused" in str(exc)
    else:
        assert found.url.startswith("https://")

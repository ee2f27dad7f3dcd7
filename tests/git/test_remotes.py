"""Which remotes may be registered."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitreg.errors import BadRequest
from gitreg.git.remotes import forge_name_from_url, normalise_remote


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/acme/terraform-aws-vpc.git",
        "ssh://git@gitlab.example.com/acme/vpc.git",
        "git@github.com:acme/vpc.git",
    ],
)
def test_network_remotes_are_kept_as_given(url: str) -> None:
    assert normalise_remote(url, allow_local=False, allow_http=False) == url


def test_local_paths_become_absolute(tmp_path: Path) -> None:
    assert normalise_remote(f"file://{tmp_path}", allow_local=True, allow_http=False) == str(
        tmp_path
    )
    assert normalise_remote(str(tmp_path), allow_local=True, allow_http=False) == str(tmp_path)


@pytest.mark.parametrize(
    "url",
    [
        "ext::sh -c touch% /tmp/pwned",
        "-uhttps://x",
        "git://example.com/x.git",
        "https://169.254.169.254/latest/meta-data",
        "https://[fe80::1]/x.git",
        "ftp://example.com/x.git",
        "",
    ],
)
def test_dangerous_remotes_are_refused(url: str) -> None:
    with pytest.raises(BadRequest):
        normalise_remote(url, allow_local=True, allow_http=False)


def test_local_and_http_remotes_can_be_turned_off(tmp_path: Path) -> None:
    with pytest.raises(BadRequest):
        normalise_remote(str(tmp_path), allow_local=False, allow_http=False)
    with pytest.raises(BadRequest):
        normalise_remote("file:///srv/git/x.git", allow_local=False, allow_http=False)
    with pytest.raises(BadRequest):
        normalise_remote("http://git.example.com/x.git", allow_local=True, allow_http=False)
    assert normalise_remote("http://git.example.com/x.git", allow_local=False, allow_http=True)


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://github.com/acme/terraform-aws-vpc.git", "acme/terraform-aws-vpc"),
        ("git@gitlab.com:group/sub/vpc.git", "sub/vpc"),
        ("/srv/git/platform/vpc.git/", "platform/vpc"),
    ],
)
def test_forge_name_is_the_last_two_path_parts(url: str, name: str) -> None:
    assert forge_name_from_url(url) == name

"""Module and provider address and subdirectory validation."""

from __future__ import annotations

import pytest

from gitreg.addresses import (
    check_subdir,
    parse_local_provider_address,
    parse_module_address,
    parse_provider_source,
)
from gitreg.errors import BadRequest


def test_valid_address_keeps_case() -> None:
    addr = parse_module_address("Platform/vpc-core/aws")
    assert (addr.namespace, addr.name, addr.system) == ("Platform", "vpc-core", "aws")


@pytest.mark.parametrize(
    "text",
    [
        "a/b",
        "a/b/c/d",
        "-a/b/c",
        "a/b-/c",
        "a/b/c-d",
        "a/b/",
        "../b/c",
        "a/b\x00/c",
        "a" * 70 + "/b/c",
    ],
)
def test_invalid_addresses_are_bad_requests(text: str) -> None:
    with pytest.raises(BadRequest):
        parse_module_address(text)


@pytest.mark.parametrize(("raw", "clean"), [("modules/vpc/", "modules/vpc"), ("/x", "x"), ("", "")])
def test_subdir_is_normalised(raw: str, clean: str) -> None:
    assert check_subdir(raw) == clean


@pytest.mark.parametrize("raw", ["../x", "a/../b", ".git", "a/.GIT/b", "a\\b", "a//b"])
def test_hostile_subdirs_are_refused(raw: str) -> None:
    with pytest.raises(BadRequest):
        check_subdir(raw)


def test_provider_addresses_are_lower_cased_and_keyed_on_that_form() -> None:
    mirrored = parse_provider_source("Registry.Terraform.IO/HashiCorp/AWS")
    assert mirrored == parse_provider_source("hashicorp/aws")
    assert mirrored.key == str(mirrored) == "registry.terraform.io/hashicorp/aws"


def test_gitregs_own_providers_have_no_hostname_in_their_key() -> None:
    own = parse_local_provider_address("Acme/Cloud")
    assert (own.hostname, own.key, str(own)) == ("", "acme/cloud", "acme/cloud")


@pytest.mark.parametrize(
    "text", ["acme--x/cloud", "-acme/cloud", "acme/cloud-", "a_b/cloud", "acme"]
)
def test_provider_parts_follow_terraform(text: str) -> None:
    with pytest.raises(BadRequest):
        parse_local_provider_address(text)
    with pytest.raises(BadRequest):
        parse_provider_source(f"example.com/{text}")

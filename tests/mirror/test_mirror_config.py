"""Reading what a Terraform configuration requires: required_providers in every
.tf file, implied providers, local child modules, and .terraform.lock.hcl."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitreg.addresses import provider_address
from gitreg.errors import ConfigError
from gitreg.mirror.config import read_configurations, read_lock_file
from gitreg.versions import parse_version

NULL = provider_address("registry.terraform.io", "hashicorp", "null")
AWS = provider_address("registry.terraform.io", "hashicorp", "aws")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_required_providers_from_every_file_are_merged(tmp_path: Path) -> None:
    write(
        tmp_path / "versions.tf",
        'terraform {\n  required_providers {\n    null = {\n      source  = "hashicorp/null"\n'
        '      version = ">= 2.0"\n    }\n    acme = {\n      source = "Example.COM/Acme/Cloud"\n'
        '      version = "~> 1.2"\n    }\n  }\n}\n',
    )
    write(
        tmp_path / "more.tf",
        'terraform {\n  required_providers {\n    null = {\n      source  = "hashicorp/null"\n'
        '      version = "< 3.0"\n    }\n  }\n}\n',
    )
    (root,) = read_configurations(tmp_path)
    assert str(root.requirements[NULL]) == "< 3.0.0, >= 2.0.0"  # files in name order
    acme = provider_address("example.com", "acme", "cloud")
    assert str(root.requirements[acme]) == "~> 1.2"


def test_legacy_string_form_and_implied_providers(tmp_path: Path) -> None:
    write(
        tmp_path / "main.tf",
        'terraform {\n  required_providers {\n    aws = "~> 3.0"\n  }\n}\n\n'
        'resource "null_resource" "x" {}\n\n'
        'data "random_id" "y" {\n  provider = random.west\n  byte_length = 2\n}\n\n'
        'provider "tls" {}\n\n'
        'data "terraform_remote_state" "z" {\n  backend = "local"\n}\n',
    )
    (root,) = read_configurations(tmp_path)
    names = {str(a): str(c) for a, c in root.requirements.items()}
    assert names == {
        "registry.terraform.io/hashicorp/aws": "~> 3.0",
        "registry.terraform.io/hashicorp/null": "",
        "registry.terraform.io/hashicorp/random": "",
        "registry.terraform.io/hashicorp/tls": "",
    }


def test_local_modules_join_their_caller_and_other_dirs_are_roots(tmp_path: Path) -> None:
    write(
        tmp_path / "live" / "main.tf",
        'module "net" {\n  source = "../modules/net"\n}\n\n'
        'module "vpc" {\n  source = "terraform-aws-modules/vpc/aws"\n}\n\n'
        'terraform {\n  required_providers {\n    aws = {\n      version = ">= 3.0"\n    }\n'
        "  }\n}\n",
    )
    write(
        tmp_path / "modules" / "net" / "main.tf",
        'terraform {\n  required_providers {\n    aws = {\n      source = "hashicorp/aws"\n'
        '      version = "~> 3.5"\n    }\n  }\n}\n',
    )
    write(tmp_path / "other" / "main.tf", 'resource "aws_vpc" "x" {}\n')
    write(tmp_path / "live" / ".terraform" / "modules" / "vpc" / "main.tf", "garbage {{{")
    roots = read_configurations(tmp_path)
    by_dir = {r.path.name: r for r in roots}
    assert set(by_dir) == {"live", "other"}
    assert str(by_dir["live"].requirements[AWS]) == ">= 3.0.0, ~> 3.5"
    assert str(by_dir["other"].requirements[AWS]) == ""
    assert any("only local modules are read" in n for n in by_dir["live"].notes)


def test_lock_file_is_read_per_root(tmp_path: Path) -> None:
    write(tmp_path / "main.tf", 'resource "null_resource" "x" {}\n')
    write(
        tmp_path / ".terraform.lock.hcl",
        '# This file is maintained automatically by "terraform init".\n\n'
        'provider "registry.terraform.io/hashicorp/null" {\n  version     = "2.1.2"\n'
        '  constraints = "~> 2.1"\n  hashes = [\n'
        '    "h1:CFnENdqQu4g3LJNevA32aDxcUz2qGkRGQpFfkI8TCdE=",\n    "zh:0123",\n  ]\n}\n',
    )
    (root,) = read_configurations(tmp_path)
    locked = root.locks[NULL]
    assert locked.version == parse_version("2.1.2")
    assert locked.hashes == ("h1:CFnENdqQu4g3LJNevA32aDxcUz2qGkRGQpFfkI8TCdE=", "zh:0123")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("terraform {", "not valid HCL"),
        (
            'terraform {\n  required_providers {\n    x = {\n      version = "v1.0"\n'
            "    }\n  }\n}\n",
            "prefix",
        ),
        (
            "terraform {\n  required_providers {\n    x = {\n      version = var.v\n"
            "    }\n  }\n}\n",
            "literal string",
        ),
        (
            'terraform {\n  required_providers {\n    x = {\n      source = "a/b/c/d"\n'
            "    }\n  }\n}\n",
            "HOSTNAME",
        ),
    ],
)
def test_bad_configuration_names_the_file_and_reason(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path / "bad.tf", text)
    with pytest.raises(ConfigError, match=message) as caught:
        read_configurations(tmp_path)
    assert str(path) in str(caught.value)


def test_no_tf_files_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no \.tf files"):
        read_configurations(tmp_path)


def test_lock_file_with_bad_version_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path / ".terraform.lock.hcl",
        'provider "registry.terraform.io/hashicorp/null" {\n  version = "latest"\n}\n',
    )
    with pytest.raises(ConfigError, match="semantic version"):
        read_lock_file(path)

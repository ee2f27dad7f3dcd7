"""Documentation extracted at publish from real git repositories."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from gitreg.catalog.extract import DOCS_FORMAT
from gitreg.services import Services
from tests.support.gitrepo import GitRepo

MAIN_TF = """
terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = { source = "hashicorp/aws", version = "~> 5.0" }
  }
}
variable "name" {
  type        = string
  description = "Name of the VPC <script>alert(1)</script>"
}
variable "cidr" {
  type    = list(string)
  default = ["10.0.0.0/16"]
}
variable "token" {
  type      = string
  default   = "x"
  sensitive = true
}
output "vpc_id" {
  value       = aws_vpc.this.id
  description = "The VPC's id"
}
resource "aws_vpc" "this" {
  cidr_block = var.cidr[0]
}
data "aws_region" "current" {}
module "subnets" {
  source = "./modules/subnets"
}
module "labels" {
  source  = "cloudposse/label/null"
  version = "0.25.0"
}
"""

README = """# VPC

A VPC for the platform team.

See [the example](examples/basic/main.tf) and ![diagram](docs/diagram.png).

<script>alert("readme")</script>
<img src=x onerror=alert(1)>

[click](javascript:alert(1)) [data](data:text/html;base64,PHNjcmlwdD4=)
[tab](java\tscript:alert(1)) [vb](VBSCRIPT:msgbox) [web](https://example.com/x)
"""

CHANGELOG = """# Changelog

## [1.1.0] - 2024-02-01
### Added
- IPv6 support

## [1.0.0] - 2024-01-01
- first
"""


def publish(svc: Services, repo: GitRepo, remote: str = "") -> None:
    record = svc.index.add_repo(remote or str(repo.path), "acme/" + repo.path.name)
    svc.index.add_module(record.id, "acme", "vpc", "aws", "", "")
    svc.publisher.sync_repo(svc.index.repo_by_url(remote or str(repo.path)))


def document(svc: Services, version: str) -> dict[str, Any]:
    module = svc.index.find_module("acme", "vpc", "aws")
    assert module is not None
    stored = svc.catalog_index.docs(module.id, version)
    assert stored is not None, f"no document for {version}"
    found = json.loads(stored)
    assert isinstance(found, dict)
    return found


def full_module(repo: GitRepo) -> None:
    repo.write("main.tf", MAIN_TF)
    repo.write("README.md", README)
    repo.write("CHANGELOG.md", CHANGELOG)
    repo.write("modules/subnets/main.tf", 'variable "vpc_id" {}\noutput "ids" { value = [] }\n')
    repo.write("modules/subnets/README.md", "# Subnets\n")
    repo.write("examples/basic/main.tf", 'module "vpc" {\n  source = "../.."\n  name = "demo"\n}\n')


def _published_full(svc: Services, repo: GitRepo) -> tuple[dict[str, Any], str]:
    """`full_module` published as 1.1.0: its document and commit."""
    full_module(repo)
    commit = repo.commit()
    repo.tag("v1.1.0")
    publish(svc, repo)
    return document(svc, "1.1.0"), commit


def test_interface_readme_changelog_submodule_and_example(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    doc, commit = _published_full(svc, make_repo("vpc"))
    assert doc["format"] == DOCS_FORMAT and doc["commit"] == commit and doc["problems"] == []
    root = doc["root"]
    inputs = {i["name"]: i for i in root["inputs"]}
    assert inputs["name"] == {
        "name": "name",
        "type": "string",
        "description": "Name of the VPC <script>alert(1)</script>",
        "default": None,
        "required": True,
        "sensitive": False,
        "nullable": True,
        "deprecated": "",
    }
    assert inputs["cidr"]["type"] == "list(string)"
    assert inputs["cidr"]["default"] == ["10.0.0.0/16"] and not inputs["cidr"]["required"]
    assert inputs["token"]["sensitive"] is True
    assert root["outputs"] == [
        {"name": "vpc_id", "description": "The VPC's id", "sensitive": False, "deprecated": ""}
    ]
    assert {(r["type"], r["name"], r["mode"]) for r in root["resources"]} == {
        ("aws_vpc", "this", "managed"),
        ("aws_region", "current", "data"),
    }
    assert {"name": "labels", "source": "cloudposse/label/null", "version": "0.25.0"} in root[
        "dependencies"
    ]
    assert root["provider_dependencies"] == [
        {"name": "aws", "namespace": "hashicorp", "source": "hashicorp/aws", "version": "~> 5.0"}
    ]
    assert root["required_version"] == ">= 1.5"
    assert [m["path"] for m in doc["submodules"]] == ["modules/subnets"]
    assert doc["submodules"][0]["inputs"][0]["name"] == "vpc_id"
    assert '<h1 id="readme-subnets">Subnets</h1>' in doc["submodules"][0]["readme_html"]
    assert [m["path"] for m in doc["examples"]] == ["examples/basic"]
    assert doc["examples"][0]["dependencies"][0]["source"] == "../.."
    assert "IPv6 support" in doc["changelog_html"] and "first" not in doc["changelog_html"]


def assert_safe(html: str) -> None:
    assert "<script" not in html.lower()
    assert not re.search(r"<[^>]*\son\w+\s*=", html, re.IGNORECASE)
    for href in re.findall(r'(?:href|src)="([^"]*)"', html):
        scheme = re.sub(r"[\x00-\x20]", "", href).split(":", 1)[0].lower()
        assert ":" not in href or scheme in ("http", "https", "mailto"), href


def test_readme_is_sanitised_and_links_resolved_against_the_version(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    html = _published_full(svc, make_repo("vpc"))[0]["root"]["readme_html"]
    assert_safe(html)
    assert "<script" not in html and 'alert("readme")' not in html  # dropped with its text
    # Inside the module: the version's own file view and raw image, in the registry.
    page = "/modules/acme/vpc/aws/1.1.0"
    assert f'href="{page}/files/examples/basic/main.tf"' in html
    assert f'src="{page}/raw/docs/diagram.png"' in html
    assert 'href="https://example.com/x"' in html


def test_relative_links_outside_the_module_point_at_the_forge_at_that_commit() -> None:
    from gitreg.catalog.readme import Links, render, web_url

    base = web_url("git@git.example.com:platform/terraform-aws-vpc.git")
    page = "/modules/a/vpc/aws/1.0.0"
    links = Links("mod", base, "c0ffee", page, "mod")
    text = "[ex](examples/a.tf) ![d](../img.png) [up](../../../x) [sub](modules/s/README.md)"
    html = render(text, links)
    assert base == "https://git.example.com/platform/terraform-aws-vpc"
    assert f'href="{page}/files/examples/a.tf"' in html
    assert f'href="{page}/modules/s"' in html
    assert f'src="{base}/raw/c0ffee/img.png"' in html
    assert "../../../x" not in html and ">up</a>" in html  # outside the repository: no link
    # Without a page (provider docs), everything goes to the forge.
    html = render("[ex](examples/a.tf)", Links("mod", base, "c0ffee"))
    assert f'href="{base}/blob/c0ffee/mod/examples/a.tf"' in html


def test_xss_in_tag_names_and_descriptions_stays_text(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("vpc")
    repo.write("main.tf", 'variable "x" {\n  description = "<img src=x onerror=alert(1)>"\n}\n')
    repo.write("README.md", '<a href="javascript:alert(1)" onclick="x()">hi</a>\n')
    repo.commit()
    repo.tag("v1.0.0-<script>")  # not a version: never reaches a document
    repo.tag("v1.0.0")
    publish(svc, repo)
    doc = document(svc, "1.0.0")
    assert_safe(doc["root"]["readme_html"])
    assert doc["root"]["inputs"][0]["description"] == "<img src=x onerror=alert(1)>"


def test_a_broken_tf_file_is_reported_and_does_not_block_publishing(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("vpc")
    repo.write("main.tf", 'variable "ok" {}\n')
    repo.write("broken.tf", 'variable "oops" {\n  type = \n')
    repo.commit()
    repo.tag("v1.0.0")
    publish(svc, repo)
    module = svc.index.find_module("acme", "vpc", "aws")
    assert module is not None and [v.version for v in svc.index.versions(module.id)] == ["1.0.0"]
    doc = document(svc, "1.0.0")
    assert [i["name"] for i in doc["root"]["inputs"]] == ["ok"]
    assert len(doc["problems"]) == 1 and doc["problems"][0].startswith("broken.tf: not valid HCL")


def test_a_broken_tf_file_kept_across_tags_is_parsed_once(
    svc: Services, make_repo: Callable[[str], GitRepo], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitreg.catalog import hcl

    texts: list[str] = []
    real = hcl._parse

    def counting(text: str) -> Any:
        texts.append(text)
        return real(text)

    monkeypatch.setattr(hcl, "_parse", counting)
    broken = f'variable "oops-{uuid.uuid4().hex}" {{\n  type = \n'  # new to the parse cache
    repo = make_repo("vpc")
    repo.write("broken.tf", broken)
    for n in range(3):
        repo.write("main.tf", f'variable "v{n}" {{}}\n')
        repo.commit()
        repo.tag(f"v1.0.{n}")
    publish(svc, repo)
    for n in range(3):
        problems = document(svc, f"1.0.{n}")["problems"]
        assert len(problems) == 1 and problems[0].startswith("broken.tf: not valid HCL")
    # The failure is kept like a good parse: the same text fails the same way.
    assert texts.count(broken) == 1

"""The classified diff of two versions, from their `.tf` files through the
catalog's HCL readers (gitreg/catalog/extract.py) to the interface and the diff."""

from __future__ import annotations

import json

import pytest

from gitreg.catalog.extract import Origin, extract
from gitreg.semver_guard.diff import Change, counts, diff
from gitreg.semver_guard.interface import Interface, interface_of


def interface(files: dict[str, str]) -> Interface:
    origin = Origin("https://git.example.com/team/mod.git", "c" * 40, "", "1.0.0")
    document = extract({k: v.encode() for k, v in files.items()}, origin, [])
    return interface_of(json.loads(json.dumps(document, sort_keys=True)))


def changes(old: dict[str, str], new: dict[str, str]) -> list[Change]:
    return diff(interface(old), interface(new))


def summary(found: list[Change]) -> set[tuple[str, str, str]]:
    return {(c.kind, c.change, c.name) for c in found}


VERSIONS = """
terraform {
  required_version = ">= 1.3"
  required_providers {
    aws = { source = "hashicorp/aws", version = "~> 5.0" }
  }
}
"""
VARIABLES = """
variable "name" {
  type        = string
  description = "The name"
}
variable "size" {
  type    = number
  default = 2
}
variable "settings" {
  type = object({
    zone = string
    tier = optional(string, "standard")
  })
  default = { zone = "a" }
}
"""
MAIN = """
resource "aws_instance" "web" {
  ami = "x"
}
module "network" {
  source = "./modules/network"
}
output "id" {
  value = aws_instance.web.id
}
"""
BASE = {"versions.tf": VERSIONS, "variables.tf": VARIABLES, "main.tf": MAIN}


def edit(files: dict[str, str], name: str, old: str, new: str) -> dict[str, str]:
    assert old in files[name], old
    return {**files, name: files[name].replace(old, new)}


def extra(files: dict[str, str], name: str, text: str) -> dict[str, str]:
    return {**files, name: files.get(name, "") + text}


TABLE: list[tuple[str, dict[str, str], set[tuple[str, str, str]]]] = [
    ("nothing changed", BASE, set()),
    (
        "variable removed",
        edit(BASE, "variables.tf", 'variable "size" {\n  type    = number\n  default = 2\n}', ""),
        {("breaking", "removed", "size")},
    ),
    (
        "variable gains a default",
        edit(
            BASE,
            "variables.tf",
            'description = "The name"',
            'description = "The name"\n  default = "x"',
        ),
        {("additive", "became_optional", "name")},
    ),
    (
        "variable loses its default",
        edit(BASE, "variables.tf", "  default = 2\n", ""),
        {("breaking", "became_required", "size")},
    ),
    (
        "default value changed",
        edit(BASE, "variables.tf", "default = 2", "default = 3"),
        {("other", "default", "size")},
    ),
    (
        "new optional variable",
        extra(BASE, "variables.tf", 'variable "extra" {\n  type = bool\n  default = false\n}\n'),
        {("additive", "added", "extra")},
    ),
    (
        "new optional variable with a null default",
        extra(BASE, "variables.tf", 'variable "extra" {\n  type = bool\n  default = null\n}\n'),
        {("additive", "added", "extra")},
    ),
    (
        "new required variable",
        extra(BASE, "variables.tf", 'variable "extra" {\n  type = bool\n}\n'),
        {("breaking", "added_required", "extra")},
    ),
    (
        "type narrowed string to number",
        edit(BASE, "variables.tf", "type        = string", "type        = number"),
        {("breaking", "type_narrowed", "name")},
    ),
    (
        "type widened number to string",
        edit(BASE, "variables.tf", "type    = number", "type    = string"),
        {("additive", "type_widened", "size")},
    ),
    (
        "object attribute made required",
        edit(BASE, "variables.tf", 'tier = optional(string, "standard")', "tier = string"),
        {("breaking", "type_narrowed", "settings")},
    ),
    (
        "object attribute removed",
        edit(BASE, "variables.tf", '    tier = optional(string, "standard")\n', ""),
        {("breaking", "type_narrowed", "settings")},
    ),
    (
        "optional object attribute added",
        edit(
            BASE, "variables.tf", "zone = string", "zone = string\n    ha = optional(bool, false)"
        ),
        {("additive", "type_widened", "settings")},
    ),
    (
        "optional default changed",
        edit(BASE, "variables.tf", '"standard"', '"premium"'),
        {("other", "type_default", "settings")},
    ),
    (
        "a number became a list",
        edit(BASE, "variables.tf", "type    = number", "type    = list(number)"),
        {("breaking", "type_narrowed", "size")},
    ),
    (
        "a type written differently is the same type",
        edit(
            BASE,
            "variables.tf",
            'tier = optional(string, "standard")',
            'tier = optional( string, "standard" )',
        ),
        set(),
    ),
    (
        "output removed",
        edit(BASE, "main.tf", 'output "id" {\n  value = aws_instance.web.id\n}', ""),
        {("breaking", "removed", "id")},
    ),
    (
        "output added",
        extra(BASE, "main.tf", 'output "arn" {\n  value = "x"\n}\n'),
        {("additive", "added", "arn")},
    ),
    (
        "output made sensitive",
        edit(
            BASE,
            "main.tf",
            "value = aws_instance.web.id",
            "value = aws_instance.web.id\n  sensitive = true",
        ),
        {("possibly_breaking", "made_sensitive", "id")},
    ),
    (
        "resource renamed with a moved block",
        extra(
            edit(
                edit(BASE, "main.tf", '"aws_instance" "web"', '"aws_instance" "app"'),
                "main.tf",
                "aws_instance.web.id",
                "aws_instance.app.id",
            ),
            "moved.tf",
            "moved {\n  from = aws_instance.web\n  to   = aws_instance.app\n}\n",
        ),
        {("other", "moved", "aws_instance.web")},
    ),
    (
        "resource renamed without a moved block",
        edit(BASE, "main.tf", '"aws_instance" "web"', '"aws_instance" "app"'),
        {("breaking", "removed", "aws_instance.web"), ("other", "added", "aws_instance.app")},
    ),
    (
        "resource removed with a removed block that destroys",
        extra(
            edit(BASE, "main.tf", 'resource "aws_instance" "web" {\n  ami = "x"\n}', ""),
            "removed.tf",
            "removed {\n  from = aws_instance.web\n}\n",
        ),
        {("breaking", "destroyed", "aws_instance.web")},
    ),
    (
        "resource removed with a removed block that keeps it",
        extra(
            edit(BASE, "main.tf", 'resource "aws_instance" "web" {\n  ami = "x"\n}', ""),
            "removed.tf",
            "removed {\n  from = aws_instance.web\n  lifecycle {\n    destroy = false\n  }\n}\n",
        ),
        {("other", "forgotten", "aws_instance.web")},
    ),
    (
        "module call renamed with a moved block",
        extra(
            edit(BASE, "main.tf", 'module "network"', 'module "net"'),
            "moved.tf",
            "moved {\n  from = module.network\n  to   = module.net\n}\n",
        ),
        {("other", "moved", "module.network")},
    ),
    (
        "module call removed",
        edit(BASE, "main.tf", 'module "network" {\n  source = "./modules/network"\n}', ""),
        {("breaking", "removed", "module.network")},
    ),
    (
        "provider constraint widened",
        edit(BASE, "versions.tf", '"~> 5.0"', '">= 5.0"'),
        {("additive", "widened", "aws")},
    ),
    (
        "provider constraint narrowed",
        edit(BASE, "versions.tf", '"~> 5.0"', '"~> 5.20"'),
        {("breaking", "narrowed", "aws")},
    ),
    (
        "provider constraint moved to the next major",
        edit(BASE, "versions.tf", '"~> 5.0"', '"~> 6.0"'),
        {("breaking", "narrowed", "aws")},
    ),
    (
        "provider source changed",
        edit(BASE, "versions.tf", '"hashicorp/aws"', '"example/aws"'),
        {("breaking", "source", "aws")},
    ),
    (
        "provider source spelled in full is the same",
        edit(BASE, "versions.tf", '"hashicorp/aws"', '"registry.terraform.io/hashicorp/aws"'),
        set(),
    ),
    (
        "new provider requirement",
        edit(
            BASE,
            "versions.tf",
            "required_providers {",
            'required_providers {\n    random = { source = "hashicorp/random" }',
        ),
        {("other", "added", "random")},
    ),
    (
        "required_version narrowed",
        edit(BASE, "versions.tf", '">= 1.3"', '">= 1.6"'),
        {("breaking", "narrowed", "required_version")},
    ),
    (
        "required_version widened",
        edit(BASE, "versions.tf", '">= 1.3"', '">= 1.0"'),
        {("additive", "widened", "required_version")},
    ),
    (
        "required_version that does not parse",
        edit(BASE, "versions.tf", '">= 1.3"', '">= one"'),
        {("possibly_breaking", "unknown", "required_version")},
    ),
    (
        "description changed",
        edit(BASE, "variables.tf", '"The name"', '"The name of it"'),
        {("other", "description", "name")},
    ),
    (
        "variable deprecated (OpenTofu)",
        edit(
            BASE,
            "variables.tf",
            'description = "The name"',
            'description = "The name"\n  deprecated = "use label"',
        ),
        {("other", "deprecation", "name")},
    ),
    (
        "variable made non-nullable without a default",
        edit(
            BASE,
            "variables.tf",
            'description = "The name"',
            'description = "The name"\n  nullable = false',
        ),
        {("breaking", "not_nullable", "name")},
    ),
    (
        "variable made non-nullable with a default",
        edit(BASE, "variables.tf", "default = 2", "default = 2\n  nullable = false"),
        {("other", "not_nullable", "size")},
    ),
    (
        "submodule added",
        {**BASE, "modules/network/main.tf": 'variable "cidr" {\n  type = string\n}\n'},
        {("additive", "added", "modules/network")},
    ),
    (
        "body change only",
        edit(BASE, "main.tf", 'ami = "x"', 'ami = "y"'),
        set(),
    ),
]


@pytest.mark.parametrize(
    ("new", "expected"), [(t[1], t[2]) for t in TABLE], ids=[t[0] for t in TABLE]
)
def test_classifies(new: dict[str, str], expected: set[tuple[str, str, str]]) -> None:
    assert summary(changes(BASE, new)) == expected


WITH_SUBMODULE = {**BASE, "modules/network/main.tf": 'variable "cidr" {\n  type = string\n}\n'}


def test_submodule_removed_is_breaking() -> None:
    found = changes(WITH_SUBMODULE, BASE)
    assert summary(found) == {("breaking", "removed", "modules/network")}
    assert found[0].detail == "submodule modules/network removed"


def test_a_submodules_changes_say_where() -> None:
    narrowed = edit(WITH_SUBMODULE, "modules/network/main.tf", "type = string", "type = number")
    found = changes(WITH_SUBMODULE, narrowed)
    assert [(c.kind, c.module, c.name) for c in found] == [("breaking", "modules/network", "cidr")]
    assert found[0].detail.endswith("in modules/network")


def test_a_rename_is_named() -> None:
    renamed = edit(BASE, "variables.tf", 'variable "name"', 'variable "label"')
    found = changes(BASE, renamed)
    assert summary(found) == {
        ("breaking", "removed", "name"),
        ("breaking", "added_required", "label"),
    }
    assert 'variable "name" removed (renamed to "label"?)' in [c.detail for c in found]


def test_chained_moves_are_followed() -> None:
    v3 = extra(
        edit(BASE, "main.tf", '"aws_instance" "web"', '"aws_instance" "server"'),
        "moved.tf",
        "moved {\n  from = aws_instance.web\n  to = aws_instance.app\n}\n"
        "moved {\n  from = aws_instance.app\n  to = aws_instance.server\n}\n",
    )
    assert summary(changes(BASE, v3)) == {("other", "moved", "aws_instance.web")}


def test_move_to_an_undeclared_address_is_possibly_breaking() -> None:
    gone = extra(
        edit(BASE, "main.tf", 'resource "aws_instance" "web" {\n  ami = "x"\n}', ""),
        "moved.tf",
        "moved {\n  from = aws_instance.web\n  to = aws_instance.nowhere\n}\n",
    )
    assert summary(changes(BASE, gone)) == {
        ("possibly_breaking", "moved_elsewhere", "aws_instance.web")
    }


def test_unreadable_types_are_reported_with_both_types() -> None:
    old = edit(BASE, "variables.tf", "type    = number", "type    = list(number)")
    new = edit(BASE, "variables.tf", "type    = number", "type    = set(number)")
    found = changes(old, new)
    assert summary(found) == {("possibly_breaking", "type_unsure", "size")}
    assert "list(number) -> set(number)" in found[0].detail


def test_counts() -> None:
    found = changes(WITH_SUBMODULE, edit(BASE, "main.tf", 'output "id"', 'output "ident"'))
    assert counts(found) == {"breaking": 2, "possibly_breaking": 0, "additive": 1, "other": 0}


def test_going_back_from_a_narrowing_widens() -> None:
    narrowed = edit(BASE, "variables.tf", "type        = string", "type        = number")
    assert summary(changes(narrowed, BASE)) == {("additive", "type_widened", "name")}

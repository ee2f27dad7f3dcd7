"""The module block a reader copies: a constraint for a listed version, the
exact version for a yanked one, `//modules/SUB` for a submodule."""

from __future__ import annotations

from typing import Any

from gitreg.catalog.snippets import module_snippet

RECORD: dict[str, Any] = {
    "namespace": "acme",
    "name": "net",
    "provider": "aws",
    "version": "1.4.2",
    "root": {"inputs": [{"name": "name", "type": "string", "required": True}]},
}
SUB = {"path": "modules/subnets", "inputs": [{"name": "cidr", "type": "string", "required": True}]}


def test_a_listed_version_gets_a_constraint() -> None:
    snippet = module_snippet("reg.example.com", RECORD)
    assert 'source  = "reg.example.com/acme/net/aws"' in snippet
    assert 'version = "~> 1.4"' in snippet and 'name = "" # required, string' in snippet


def test_a_yanked_version_is_pinned_exactly() -> None:
    assert 'version = "1.4.2"' in module_snippet("reg.example.com", RECORD, yanked=True)


def test_a_submodule_is_sourced_with_its_path() -> None:
    snippet = module_snippet("reg.example.com", RECORD, SUB)
    assert snippet.startswith('module "subnets" {')
    assert 'source  = "reg.example.com/acme/net/aws//modules/subnets"' in snippet
    assert 'cidr = "" # required, string' in snippet and "name =" not in snippet

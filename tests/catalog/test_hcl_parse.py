"""gitreg/catalog/hcl.py parses with python-hcl2's grammar without positions:
the same result as `hcl2.loads` for every file, valid or not, and a file
python-hcl2 refuses is reported, never a reason for a publish to fail."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hcl2
import pytest

from gitreg.catalog import hcl
from gitreg.catalog.lru import SizedLru
from gitreg.services import Services, build_services
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo

VALID = [
    'variable "x" {}\n',
    # Heredocs (plain and indented), templates with directives, escapes.
    'variable "ctx" {\n  type = object({\n    a = list(string)\n    b = optional(number, 3)\n'
    "  })\n  default = { a = [], b = null }\n  description = <<-EOT\n    Two\n      lines\n"
    '  EOT\n}\nvariable "y" {\n  description = <<EOF\nplain ${var.x} and $${not}\nEOF\n}\n',
    'output "o" {\n  value = "%{ for k, v in var.m }${k}=${v}%{ endfor }"\n'
    '  description = "tab\\t \\"quoted\\" \\u00e9"\n  sensitive = true\n}\n',
    # Operators continued on the next line (python-hcl2's post-lexer), comments.
    "locals {\n  a = var.x\n    ? 1 # why\n    : 2\n  b = (1 +\n  2) * -3 / 4 % 5\n"
    '  c = [for s in var.l : upper(s) if s != ""]\n  d = { for k, v in var.m : k => v... }\n'
    "  e = var.list[*].id\n  f = var.obj.*.name\n  g = !true && false || null == 1\n}\n"
    "/* block\ncomment */\n// line\n",
    'terraform {\n  required_version = ">= 1.5"\n  required_providers {\n'
    '    aws = { source = "hashicorp/aws", version = "~> 5.0" }\n    old = "~> 2.0"\n  }\n}\n',
    'resource "aws_vpc" "this" {\n  cidr_block = var.cidr[0]\n  dynamic "tag" {\n'
    "    for_each = var.tags\n    content {\n      key = tag.key\n    }\n  }\n"
    "  lifecycle {\n    ignore_changes = [tags]\n  }\n}\n"
    'data "aws_region" "current" {}\nmodule "m" {\n  source = "./m"\n  version = "1.0"\n}\n',
    'in {}\nvariable "for" { default = 1.5e3 }\n',
    "",
    "\n\n# only a comment\n",
]

INVALID = [
    'variable "oops" {\n  type = \n',
    "locals {\n  a = <<EOF\nx\n}\n",
    'x = "%{ if true }a"\n',
    'variable = 1\nvariable "x" {}\n',  # python-hcl2 raises RuntimeError for this one
    "a = 1\na = 2\n}\n",
    'output "o" { value = [1, 2 }\n',
    "\x00\x01",
    "x = 0x1\n",
    'variable "x" {\n  default = ' + "[" * 3000 + "]" * 3000 + "\n}\n",  # RecursionError
]


def _reference(text: str) -> dict[str, Any] | str:
    """What `hcl2.loads` makes of `text`, or the first line of why it cannot."""
    try:
        loaded = hcl2.loads(text, serialization_options=hcl._options())
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        return lines[0][:200] if lines else type(exc).__name__
    return loaded if isinstance(loaded, dict) else {}


def _ours(text: str) -> dict[str, Any] | str:
    try:
        return hcl._parse(text)
    except ValueError as exc:
        return str(exc)


@pytest.mark.parametrize("text", VALID + INVALID)
def test_parses_as_hcl2_loads_does(text: str) -> None:
    ours = _ours(text)
    assert ours == _reference(text)
    assert isinstance(ours, dict) == (text in VALID)


@pytest.mark.parametrize("text", INVALID)
def test_invalid_text_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        hcl.parse_file(text)


def test_the_parser_keeps_no_positions() -> None:
    assert hcl._parser().options.propagate_positions is False


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Services]:
    services = build_services(load_settings({"data_dir": tmp_path / "data"}, environ={}))
    yield services
    services.close()


def test_a_file_hcl2_refuses_after_parsing_is_reported_and_the_sync_goes_on(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("vpc")
    repo.write("main.tf", 'variable "ok" {}\n')
    repo.write("dup.tf", 'variable = 1\nvariable "x" {}\n')
    repo.commit()
    repo.tag("v1.0.0")
    repo.write("other.txt", "x")
    repo.commit()
    repo.tag("v1.1.0")
    record = svc.index.add_repo(str(repo.path), "")
    module = svc.index.add_module(record.id, "acme", "vpc", "aws", "", "")
    result = svc.publisher.sync_repo(svc.index.repo(record.id))
    assert result.published == ["acme/vpc/aws 1.0.0", "acme/vpc/aws 1.1.0"]
    for key in ("1.0.0", "1.1.0"):
        stored = svc.catalog.docs(module.id, key)
        assert stored is not None
        doc = json.loads(stored)
        assert [i["name"] for i in doc["root"]["inputs"]] == ["ok"]
        assert doc["problems"] == ["dup.tf: not valid HCL: Attribute variable is already defined."]


def test_the_parse_cache_is_bounded_by_the_text_it_holds() -> None:
    cache: SizedLru[str, dict[str, Any] | str] = SizedLru(1_000, largest_share=2)
    texts = [f'variable "v{n}" {{ description = "{"x" * 200}" }}\n' for n in range(20)]
    for text in texts:
        assert isinstance(hcl.parse_outcome(text, cache), dict)
        assert cache.size <= 1_000
    assert cache.size > 800  # full, not emptied
    parsed: list[str] = []
    real = hcl._parse

    def counting(text: str) -> dict[str, Any] | str:
        parsed.append(text)
        return real(text)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hcl, "_parse", counting)
        hcl.parse_outcome(texts[-1], cache)  # recent: kept
        hcl.parse_outcome(texts[0], cache)  # oldest: evicted long ago, parsed again
    assert parsed == [texts[0]]

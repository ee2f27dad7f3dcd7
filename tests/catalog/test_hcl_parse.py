"""gitreg/catalog/hcl.py parses with python-hcl2's grammar without positions:
the same result as `hcl2.loads` for every file, valid or not, and a file
python-hcl2 refuses is reported, never a reason for a publish to fail."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import hcl2
import pytest

from gitreg.catalog import hcl, hcl_reduce
from gitreg.catalog.lru import SizedLru
from gitreg.services import Services
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
    # Rules python-hcl2's transformer rewrites as it builds them (string
    # directives assembled, keyword keys and labels made identifiers, newlines
    # taken out of operators), which hcl_reduce.py runs while lark parses.
    'a = "p%{ if var.on }y%{ else }n%{ endif }s"\n'
    'b = "%{~ for k, v in var.m ~}${k}=${v}%{~ endfor ~}"\n'
    'c = "use %%{x} and $${y}"\nd = "kms%{ if var.id != \\"p\\" }-${var.id}%{ endif }"\n',
    'locals {\n  h = { in = "h", for = 1, "k3" = { k4 = "a" }, (5 + 5) = "d", a.b = 2 }\n'
    '  i = [a, b\n    , "c${aaa}", [1, 2, 3,], provider::func::aa(5)]\n'
    "  j = f(\n    a, b\n    , c,\n    d ...\n  )\n  k = a.b.5\n  l = a.*.b\n  m = a[*][c].a.*.1\n"
    "  n = (a ? b : c) ? d : -(e + f)\n"
    '  o = {\n    for k, v in local.m :\n    k => v\n    if !contains(x, k)\n    && k != ""\n'
    "  }\n}\n",
    'block label1 label2 {\n  nested "x" {\n    for_each = 1\n  }\n  true = false\n}\r\n'
    'variable "crlf" {\r\n  default = <<-EOT\r\n    x\r\n  EOT\r\n}\r\n',
    # Nested deeper than hcl_reduce.MAX_DEPTH, far from the recursion limit:
    # parsed the tree's way, to the same result.
    "x = " + "[" * 60 + "]" * 60 + "\n",
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
    'x = "%{ for a in b }c"\n',
    # python-hcl2's transformer fails on line 1 as lark reduces it, before lark
    # has read the syntax error on line 2, which is what `hcl2.loads` reports.
    'x = "%{ if true }a"\ny = [1, 2\n',
    'resource "a" "b" {\n  tags = 1\n  tags {\n  }\n}\n',  # "already defined", nested
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


def _depth_free(result: dict[str, Any] | str) -> dict[str, Any] | str:
    """A RecursionError's message names the operation the stack ran out in, and
    that depends on how deep the test runner's own stack is (a parallel test
    worker's is deeper), not on the parser."""
    if isinstance(result, str) and result.startswith("maximum recursion depth exceeded"):
        return "maximum recursion depth exceeded"
    return result


@pytest.mark.parametrize("text", VALID + INVALID)
def test_parses_as_hcl2_loads_does(text: str) -> None:
    ours = _ours(text)
    assert _depth_free(ours) == _depth_free(_reference(text))
    assert isinstance(ours, dict) == (text in VALID)


@pytest.mark.parametrize("text", INVALID)
def test_invalid_text_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        hcl.parse_file(text)


def test_the_parser_keeps_no_positions() -> None:
    assert hcl._parser().options.propagate_positions is False
    reducing = hcl_reduce._parser()
    assert reducing is not None
    assert reducing.options.propagate_positions is False


@pytest.mark.parametrize("text", VALID + INVALID)
def test_files_that_parse_are_read_without_a_tree(text: str) -> None:
    """hcl_reduce.py: python-hcl2's transformer run as lark reduces each rule,
    to what `hcl2.loads` makes of the file; a file that fails (or nests deeper
    than MAX_DEPTH) is left to the tree's way, for the reason `hcl2.loads` gives."""
    fast = hcl_reduce.parse(text, hcl._options())
    if text in VALID and text != VALID[-1]:
        assert fast == _reference(text)
    else:
        assert fast is None


SHAPES: dict[str, Callable[[int], str]] = {
    "tuples": lambda n: "x = " + "[" * n + "]" * n + "\n",
    "calls": lambda n: "x = " + "f(" * n + ")" * n + "\n",
    "blocks": lambda n: "b {\n" * n + "}\n" * n,
    "sums": lambda n: "x = 1" + " + 1" * n + "\n",
    "templates": lambda n: "x = " + '"${' * n + "a" + '}"' * n + "\n",
}


@pytest.mark.parametrize("shape", SHAPES)
def test_deep_nesting_is_decided_as_the_tree_walk_decides(shape: str) -> None:
    """python-hcl2's tree walk runs out of stack some 500 rule levels down (a
    problem in the document), where a parse without the tree would not: at any
    depth the outcome is the tree walk's, from the same stack depth."""
    for depth in (10, 40, 100, 200, 300, 600):
        text = SHAPES[shape](depth)
        ours = hcl._parse(text)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(hcl_reduce, "parse", lambda text, options: None)
            assert hcl._parse(text) == ours, depth


def _mutated(rng: random.Random, text: str) -> str:
    pieces = ["{", "}", "[", "]", "(", ")", "\n", "=", ",", ":", "?", '"', "${", "%{", "#c\n"]
    pieces += ["/*x*/", "<<EOF\nz\nEOF\n", "a", "-1", "+", ".", "*", "...", "=>", "for", "in"]
    pieces += ["if", "endif", "~", "\\", "$${", "null", "x = 1\n", "b {}\n", "a {\n}\n"]
    for _ in range(rng.randint(1, 4)):
        at, kind = rng.randint(0, len(text)), rng.random()
        if kind < 0.4:
            text = text[:at] + rng.choice(pieces) + text[at:]
        elif kind < 0.7:
            text = text[:at] + text[at + rng.randint(1, 5) :]
        else:
            start = rng.randint(0, len(text))
            text = text[:at] + text[start : start + rng.randint(1, 30)] + text[at:]
    return text


def test_mutated_files_parse_as_hcl2_loads_does() -> None:
    """Valid and broken variants of the corpus (about one in ten still
    parses): the same document or the same reason as `hcl2.loads`."""
    rng = random.Random(13)
    seeds = [text for text in VALID + INVALID if len(text) < 1000]
    for _ in range(400):
        text = _mutated(rng, rng.choice(seeds))
        assert _ours(text) == _reference(text), text


def test_python_hcl2_rules_without_a_method_leave_parsing_to_the_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rule python-hcl2's transformer has no method for (another version of
    it) would reach the reducing parse as a lark Tree: that parse is not used."""
    real = hcl_reduce._reducer

    def without_tuples() -> Any:
        reducer = real()
        del reducer.tuple  # type: ignore[union-attr]
        return reducer

    monkeypatch.setattr(hcl_reduce, "_reducer", without_tuples)
    hcl_reduce._parser.cache_clear()
    try:
        assert hcl_reduce._parser() is None
        assert hcl_reduce.parse(VALID[1], hcl._options()) is None
        assert hcl._parse(VALID[1]) == _reference(VALID[1])
    finally:
        hcl_reduce._parser.cache_clear()


def test_methods_lark_cannot_call_inline_leave_parsing_to_the_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hcl2.transformer
    from lark import v_args

    class Inline(hcl2.transformer.RuleTransformer):
        @v_args(inline=True)
        def int_lit(self, *args: Any) -> Any:
            return super().int_lit(*args)

    monkeypatch.setattr(hcl2.transformer, "RuleTransformer", Inline)
    assert hcl_reduce._reducer() is None


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
        stored = svc.catalog_index.docs(module.id, key)
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

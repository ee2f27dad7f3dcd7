"""gitreg/catalog/hcl_plain.py reads plain `.tf` files without lark: whatever it
returns is what `hcl2.loads` returns, key order included, and whatever it is
not sure of (python-hcl2's errors among them) it leaves to python-hcl2."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from gitreg.catalog import hcl, hcl_plain, hcl_reduce
from tests.catalog.test_hcl_parse import INVALID, VALID, _mutated, _reference

NAMES = ["a", "b_c", "d-e", "var", "x1", "format", "inx", "true_", "nullable", "each", "_u"]
NOT_NAMES = ["in", "for", "if", "for_each", "endif", "true", "null", "false"]
CHARS = "ab {}:=#/.,-é>< ~*[]()?!"
RARE = ["$", "%", "\\", "${a}", "%{", "\t", "'"]


class Writer:
    """Random files of the plain subset, with now and then something outside it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def name(self) -> str:
        return self.rng.choice(NOT_NAMES if self.chance(0.03) else NAMES)

    def string(self) -> str:
        text = "".join(self.rng.choice(CHARS) for _ in range(self.rng.randint(0, 8)))
        if self.chance(0.05):
            text += self.rng.choice(RARE)
        return '"' + text + '"'

    def gap(self) -> str:
        return self.rng.choice(["", " ", "  ", "\t"])

    def newline(self) -> str:
        comment = self.rng.choice(["", "", "", " # note", " // x ${y}", "  #"])
        return comment + "\n" * self.rng.randint(1, 2)

    def reference(self, depth: int) -> str:
        name = self.name()
        if self.chance(0.5) or depth > 3:
            dot = "." + self.gap() if self.chance(0.1) else "."
            return dot.join([name] + [self.name() for _ in range(self.rng.randint(1, 3))])
        args = [self.argument(depth + 1) for _ in range(self.rng.randint(0, 3))]
        sep = self.rng.choice([", ", ",", " ,  "])
        trailing = "," if args and self.chance(0.1) else ""
        return name + self.gap() + "(" + self.gap() + sep.join(args) + trailing + ")"

    def argument(self, depth: int) -> str:
        kind = self.rng.randint(0, 5)
        if kind == 0:
            return self.string()
        if kind == 1:
            return self.rng.choice(["0", "7", "-3", "007", "-0", "12345678901234567890"])
        if kind == 2:
            return self.rng.choice(["true", "false", "null"])
        if kind == 3 and self.chance(0.1):
            return self.rng.choice(["[1]", "{a = 1}", "1.5", "a[0]", "-a", "a + 1", "a.*"])
        return self.reference(depth) if kind > 3 else self.name()

    def value(self, depth: int = 0) -> str:
        kind = self.rng.randint(0, 7)
        if kind <= 4 or depth > 3:
            return self.argument(depth)
        if kind == 5:
            return self.reference(depth)
        if kind == 6:
            items = [self.value(depth + 1) for _ in range(self.rng.randint(0, 3))]
            sep = self.rng.choice([", ", ",\n  ", "\n  , ", ","])
            trailing = "," if items and self.chance(0.2) else ""
            return "[" + self.rng.choice(["", "\n"]) + sep.join(items) + trailing + "]"
        elements = [f"{self.name()}{self.gap()}={self.gap()}{self.value(depth + 1)}"]
        elements += [
            f"{self.name()} = {self.value(depth + 1)}" for _ in range(self.rng.randint(0, 2))
        ]
        sep = self.rng.choice([", ", "\n  ", ",\n  ", " ", "\n  ,"])
        return "{" + self.rng.choice(["", " ", "\n  "]) + sep.join(elements) + self.gap() + "}"

    def body(self, depth: int) -> str:
        items = []
        for _ in range(self.rng.randint(0, 4)):
            if self.chance(0.6) or depth > 2:
                items.append(f"{self.name()}{self.gap()}={self.gap()}{self.value()}")
            else:
                items.append(self.block(depth + 1))
        return "".join(item + self.newline() for item in items)

    def block(self, depth: int) -> str:
        labels = [self.string() if self.chance(0.7) else self.name() for _ in range(3)]
        head = " ".join([self.name(), *labels[: self.rng.randint(0, 2)]])
        if self.chance(0.3):
            one = f"{self.name()} = {self.value()}" if self.chance(0.7) else ""
            return f"{head} {{{self.gap()}{one}{self.gap()}}}"
        return f"{head} {{{self.newline()}{self.body(depth)}}}"

    def file(self) -> str:
        return self.rng.choice(["", "\n", "# head\n"]) + self.body(0)


def _agrees(text: str) -> bool:
    """hcl_plain's result, when it has one, is `hcl2.loads`'s in the same order."""
    plain = hcl_plain.parse(text)
    if plain is None:
        return False
    reference = _reference(text)
    assert isinstance(reference, dict), (text, reference)
    assert json.dumps(plain) == json.dumps(reference), text
    return True


def test_generated_plain_files_read_as_hcl2_loads_reads_them() -> None:
    writer = Writer(random.Random(7))
    read = sum(_agrees(writer.file()) for _ in range(1500))
    assert read > 500  # most are plain: the comparison is not vacuous


def test_mutated_plain_files_are_read_as_hcl2_loads_reads_them_or_left_to_it() -> None:
    rng = random.Random(11)
    writer = Writer(rng)
    read = sum(_agrees(_mutated(rng, writer.file())) for _ in range(1500))
    assert read > 100


@pytest.mark.parametrize("text", VALID + INVALID)
def test_the_corpus_is_read_as_hcl2_loads_reads_it_or_left_to_it(text: str) -> None:
    _agrees(text)


PLAIN = (
    'variable "vpc" {\n  type        = map(string)\n  description = "The VPC: a/b, {x}"\n'
    "  default     = {}\n  nullable    = false\n}\n"
    'output "id" { value = aws_vpc.this.id }\nresource "null_resource" "r" {}\n'
    'terraform {\n  required_version = ">= 1.5"\n  required_providers {\n'
    '    aws = {\n      source  = "hashicorp/aws" # pinned\n      version = "~> 5.0"\n    }\n'
    "  }\n}\n"
    'module "m" {\n  source = "./m"\n'
    '  list   = [1, -2, "x", true, null, [], {a = lookup(m, "k", 0)}]\n}\n'
)

NOT_PLAIN = [
    'x = "${var.a}"\n',  # a template
    'x = "a\\"b"\n',  # an escape
    "x = a + 1\n",
    "x = a ? b : c\n",
    "x = a[0]\n",
    "x = [for s in l : s]\n",
    "x = 1.5\n",
    "x = <<EOF\na\nEOF\n",
    "/* a */\nx = 1\n",
    "x = 1\r\n",
    "in = 1\n",  # a keyword as a name
    "x = 1\nx = 2\n",  # python-hcl2 keeps the second: not guessed here
    "x = 1\nx {}\n",  # python-hcl2: "Attribute x is already defined."
    "x = {a = 1, a = 2}\n",
    "x = " + "[" * (hcl_plain.MAX_NESTING + 1) + "]" * (hcl_plain.MAX_NESTING + 1) + "\n",
    'x = f(a)\n"',
    "x = provider::p::f(1)\n",
    "x = f(a)[0]\n",
    "x = " + "1" * 5000 + "\n",  # Python's int() refuses it: python-hcl2's reason, not a crash
]


def test_plain_files_are_read_without_lark(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_lark(*args: Any) -> Any:
        raise AssertionError("lark was used")

    monkeypatch.setattr(hcl_reduce, "parse", no_lark)
    monkeypatch.setattr(hcl, "_parser", no_lark)
    assert json.dumps(hcl._parse(PLAIN)) == json.dumps(_reference(PLAIN))


@pytest.mark.parametrize("text", NOT_PLAIN)
def test_anything_else_is_left_to_python_hcl2(text: str) -> None:
    assert hcl_plain.parse(text) is None
    assert hcl._parse(text) == _reference(text)

"""Plain `.tf` files read without lark, to exactly what python-hcl2 makes of them.

Most of a module's interface is in files such as `variables.tf`, `outputs.tf`
and `versions.tf`: blocks of attributes whose values are strings, whole
numbers, `true`/`false`/`null`, references (`var.x`), calls (`map(string)`) and
lists and objects of those. python-hcl2 spends more than half of its time on
such a file in lark's lexer and LALR parser, and for a module of a dozen such
files that alone is more than extraction's whole budget (docs/performance.md,
"Extraction at publish"). This reads that plain subset in one regular
expression and a small descent, and returns None for anything else (templates
and escapes in strings, operators, conditionals, `for`, splats, indexes,
heredocs, numbers that are not whole, keywords as names, `/* */` comments,
CRLF, nesting deeper than MAX_NESTING, a name set twice in one body or object,
and every syntax error): python-hcl2 then reads the file, so the reason given
for a file that does not parse is always its own. tests/catalog/test_hcl_plain.py
compares the result, key order included, with `hcl2.loads` on generated files.

The result is what `hcl2.loads` returns with hcl.py's options (quotes stripped,
no comments, `__is_block__` marking blocks): a value that is a reference or a
call is the text `${...}`, as python-hcl2 writes it back (one space after each
comma, none elsewhere); a bare name is itself.
"""

from __future__ import annotations

import re
from typing import Any

# Deeper than this (blocks, lists, objects and calls), python-hcl2 decides: its
# recursion limits are its own (see hcl_reduce.MAX_DEPTH).
MAX_NESTING = 24

# python-hcl2's grammar (hcl2.lark), restricted: NL_OR_COMMENT without `/* */`;
# strings of STRING_CHARS without `\`, `$`, `%` or a newline (no escapes,
# templates or interpolations); INT_LITERAL; NAME; the punctuation below. Any
# other character leaves the file to python-hcl2.
_TOKEN = re.compile(
    r"(?P<nl>(?:(?:#|//)[^\n]*)?\n)|(?P<ws>[ \t]+)|(?P<str>\"[^\"\\$%\n]*\")"
    r"|(?P<int>-?[0-9]+)|(?P<name>[a-zA-Z_][a-zA-Z0-9_-]*)|(?P<punct>[{}\[\](),=.])"
)
# Terminals of their own in the grammar; as names they are left to python-hcl2.
_KEYWORDS = frozenset(("if", "in", "for", "for_each", "else", "endif", "endfor"))
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}
_IS_BLOCK = "__is_block__"  # hcl2.const.IS_BLOCK, as `explicit_blocks` adds it


class _Unsure(Exception):
    """Outside the plain subset: python-hcl2 reads the file."""


def parse(text: str) -> dict[str, Any] | None:
    """What `hcl2.loads` returns for `text` with hcl.py's options, or None when
    `text` is not plain HCL as this module reads it (python-hcl2 decides then)."""
    if "\r" in text:
        return None
    try:
        reader = _Reader(_tokens(text + "\n"))  # the newline `hcl2.loads` adds
        body = _body(reader, "end")
    except (_Unsure, RecursionError, ValueError):  # ValueError: an int over 4,300 digits
        return None
    return body


def _tokens(text: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    at = 0
    for match in _TOKEN.finditer(text):
        if match.start() != at:
            raise _Unsure  # a character of no token above
        at = match.end()
        kind = match.lastgroup
        if kind == "punct":
            found.append((match.group(), ""))
        elif kind != "ws":
            found.append((str(kind), match.group()))
    if at != len(text):
        raise _Unsure
    found.append(("end", ""))
    return found


class _Reader:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.at = 0
        self.nesting = 0

    def kind(self) -> str:
        return self.tokens[self.at][0]

    def take(self) -> tuple[str, str]:
        token = self.tokens[self.at]
        if token[0] == "end":
            raise _Unsure
        self.at += 1
        return token

    def expect(self, kind: str) -> None:
        if self.take()[0] != kind:
            raise _Unsure

    def name(self) -> str:
        kind, text = self.take()
        if kind != "name" or text in _KEYWORDS or text in _LITERALS:
            raise _Unsure
        return text

    def newlines(self) -> None:
        while self.tokens[self.at][0] == "nl":
            self.at += 1

    def enter(self) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise _Unsure


def _body(reader: _Reader, closing: str) -> dict[str, Any]:
    """Attributes and blocks up to `closing` (left for the caller), each
    followed by a newline or `closing` (python-hcl2 also takes two on one line)."""
    result: dict[str, Any] = {}
    blocks: set[str] = set()
    while True:
        reader.newlines()
        if reader.kind() == closing:
            return result
        name = reader.name()
        if reader.kind() == "=":
            reader.at += 1
            if name in result:  # set twice, or after a block of that name
                raise _Unsure
            result[name] = _value(reader)
        else:
            if name in result and name not in blocks:
                raise _Unsure  # "Attribute x is already defined." is python-hcl2's to say
            blocks.add(name)
            result.setdefault(name, []).append(_block(reader))
        if reader.kind() not in ("nl", closing):
            raise _Unsure


def _block(reader: _Reader) -> dict[str, Any]:
    labels: list[str] = []
    while reader.kind() in ("str", "name"):
        kind, text = reader.tokens[reader.at]
        if kind == "str":
            reader.at += 1
            labels.append(text[1:-1])
        else:
            labels.append(reader.name())
    reader.expect("{")
    reader.enter()
    body = _body(reader, "}")
    reader.expect("}")
    reader.nesting -= 1
    body[_IS_BLOCK] = True
    for label in reversed(labels):
        body = {label: body}
    return body


def _value(reader: _Reader) -> Any:
    kind, text = reader.take()
    if kind == "str":
        return text[1:-1]
    if kind == "int":
        return int(text)
    if kind == "name" and text in _LITERALS:
        return _LITERALS[text]
    if kind == "name" and text not in _KEYWORDS:
        if reader.kind() in (".", "("):
            return "${" + _reference(reader, text) + "}"
        return text
    if kind in ("[", "{"):
        reader.enter()
        found = _tuple(reader) if kind == "[" else _object(reader)
        reader.nesting -= 1
        return found
    raise _Unsure


def _tuple(reader: _Reader) -> list[Any]:
    items: list[Any] = []
    reader.newlines()
    while reader.kind() != "]":
        items.append(_value(reader))
        reader.newlines()
        if reader.kind() == ",":
            reader.at += 1
            reader.newlines()
        elif reader.kind() != "]":
            raise _Unsure
    reader.at += 1
    return items


def _object(reader: _Reader) -> dict[str, Any]:
    found: dict[str, Any] = {}
    reader.newlines()
    while reader.kind() != "}":
        key = reader.name()
        if key in found:
            raise _Unsure
        reader.expect("=")
        found[key] = _value(reader)
        reader.newlines()
        if reader.kind() == ",":
            reader.at += 1
            reader.newlines()
    reader.at += 1
    return found


def _reference(reader: _Reader, name: str) -> str:
    """`a.b.c` or `f(x, y)` after its first name, as python-hcl2 writes it."""
    if reader.kind() == "(":
        reader.at += 1
        reader.enter()
        args: list[str] = []
        while reader.kind() != ")":
            args.append(_argument(reader))
            if reader.kind() == ",":
                reader.at += 1
            elif reader.kind() != ")":
                raise _Unsure
        reader.at += 1
        reader.nesting -= 1
        if reader.kind() in (".", "("):
            raise _Unsure  # `f(x).y`
        return f"{name}({', '.join(args)})"
    parts = [name]
    while reader.kind() == ".":
        reader.at += 1
        parts.append(reader.name())
    if reader.kind() == "(":
        raise _Unsure
    return ".".join(parts)


def _argument(reader: _Reader) -> str:
    kind, text = reader.take()
    if kind == "str":
        return text  # quotes kept inside `${...}`
    if kind == "int" and not text.startswith("-"):  # python-hcl2 keeps `-0` there
        return str(int(text))
    if kind == "name" and text in _LITERALS:
        return text
    if kind == "name" and text not in _KEYWORDS:
        return _reference(reader, text) if reader.kind() in (".", "(") else text
    raise _Unsure

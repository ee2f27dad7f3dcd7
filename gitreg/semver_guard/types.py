"""Terraform type constraints, read from their text and compared by what they accept.

A variable's `type` is kept in its document as written (gitreg/catalog/hcl.py):
`string`, `list(object({name = string, size = optional(number, 5)}))`, ...
`parse_type` reads that type-constraint language only (primitives, `any`,
`list`/`set`/`map`/`object`/`tuple`, `optional(T[, default])` in an object
attribute, and the legacy bare `list`/`map`/`set` and quoted `"string"`), and
returns None for anything else. `widening` then answers, for two types,
whether every value the old one accepted still converts to the new one, as
Terraform converts a module argument to its variable's type:

- `same`: structurally equal (the text may differ in spacing or defaults);
- `wider`: everything accepted before still is (a number into a string, an
  optional attribute added, a required attribute made optional, `any`);
- `narrower`: something accepted before is refused now, with the reasons;
- `unsure`: the types cannot be compared for sure (list <-> set, map <->
  object, a type this module does not read): reported as possibly breaking.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Literal

PRIMITIVES = ("string", "number", "bool")
_COLLECTIONS = ("list", "set", "map")


@dataclass(frozen=True)
class Attribute:
    """An object attribute: its type, and whether `optional(...)` (with a default)."""

    type: TypeExpr
    optional: bool = False
    default: str = ""


@dataclass(frozen=True)
class TypeExpr:
    """`kind` is a primitive, "any", a collection ("list", "set", "map": `element`),
    "object" (`attributes`) or "tuple" (`elements`)."""

    kind: str
    element: TypeExpr | None = None
    attributes: tuple[tuple[str, Attribute], ...] = ()
    elements: tuple[TypeExpr, ...] = ()

    def __str__(self) -> str:
        if self.kind in _COLLECTIONS:
            return f"{self.kind}({self.element})"
        if self.kind == "tuple":
            return "tuple([" + ", ".join(str(e) for e in self.elements) + "])"
        if self.kind == "object":
            parts = []
            for name, a in self.attributes:
                shown = str(a.type)
                if a.optional:
                    shown = f"optional({shown}{', ' + a.default if a.default else ''})"
                parts.append(f"{name} = {shown}")
            return "object({" + ", ".join(parts) + "})"
        return self.kind


ANY = TypeExpr("any")

# "changed": a difference that accepts the same values (an attribute's default).
Verdict = Literal["same", "changed", "wider", "unsure", "narrower"]
_RANK: tuple[Verdict, ...] = ("same", "changed", "wider", "unsure", "narrower")


@dataclass
class Widening:
    """How a new type relates to an old one: the strongest verdict, and each
    difference with its own (paths such as `.tags` or `[*].name`)."""

    verdict: Verdict = "same"
    reasons: list[tuple[Verdict, str]] = field(default_factory=list)

    def add(self, verdict: Verdict, reason: str) -> None:
        self.reasons.append((verdict, reason))
        if _RANK.index(verdict) > _RANK.index(self.verdict):
            self.verdict = verdict


_TOKEN = re.compile(r'\s*(?:[A-Za-z_][A-Za-z0-9_-]*|[(){}\[\],=:]|"(?:[^"\\]|\\.)*"|-?[0-9.]+|\S)')


class _Unreadable(Exception):
    pass


@functools.lru_cache(maxsize=4096)
def parse_type(text: str) -> TypeExpr | None:
    """The type `text` constrains to; ANY for no constraint; None when `text`
    is not a type constraint this module reads. Kept by text: a module's types
    repeat from version to version (and TypeExpr is immutable)."""
    text = text.strip()
    if not text:
        return ANY
    if len(text) >= 2 and text[0] == text[-1] == '"':  # Terraform 0.11's `type = "string"`
        text = text[1:-1]
    try:
        reader = _Reader(text)
        found = reader.type()
        if reader.peek() != "":
            raise _Unreadable
    except (_Unreadable, RecursionError):
        return None
    return found


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, int, int]] = []  # text, start, end
        at = 0
        while at < len(text):
            match = _TOKEN.match(text, at)
            if match is None or match.end() == at:
                break
            token = match.group().lstrip()
            self.tokens.append((token, match.end() - len(token), match.end()))
            at = match.end()
        self.at = 0

    def peek(self) -> str:
        return self.tokens[self.at][0] if self.at < len(self.tokens) else ""

    def take(self) -> str:
        token = self.peek()
        if not token:
            raise _Unreadable
        self.at += 1
        return token

    def expect(self, token: str) -> None:
        if self.take() != token:
            raise _Unreadable

    def type(self) -> TypeExpr:
        name = self.take()
        if name in (*PRIMITIVES, "any"):
            return TypeExpr(name)
        if name in _COLLECTIONS:
            if self.peek() != "(":  # legacy bare `list`, `map`, `set`
                return TypeExpr(name, element=ANY)
            self.expect("(")
            element = self.type()
            self.expect(")")
            return TypeExpr(name, element=element)
        if name == "tuple":
            self.expect("(")
            self.expect("[")
            elements = []
            while self.peek() != "]":
                elements.append(self.type())
                if self.peek() == ",":
                    self.take()
            self.expect("]")
            self.expect(")")
            return TypeExpr("tuple", elements=tuple(elements))
        if name == "object":
            self.expect("(")
            self.expect("{")
            attributes: dict[str, Attribute] = {}
            while self.peek() != "}":
                key = self.take()
                if key.startswith('"'):
                    key = key[1:-1]
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key) or key in attributes:
                    raise _Unreadable
                if self.take() not in ("=", ":"):
                    raise _Unreadable
                attributes[key] = self.attribute()
                if self.peek() == ",":
                    self.take()
            self.expect("}")
            self.expect(")")
            return TypeExpr("object", attributes=tuple(sorted(attributes.items())))
        raise _Unreadable

    def attribute(self) -> Attribute:
        if self.peek() != "optional":
            return Attribute(self.type())
        self.take()
        self.expect("(")
        inner = self.type()
        default = ""
        if self.peek() == ",":
            self.take()
            default = self.expression()
        self.expect(")")
        return Attribute(inner, optional=True, default=default)

    def expression(self) -> str:
        """The source text of a default, up to the `)` that closes `optional(`."""
        if self.at >= len(self.tokens):
            raise _Unreadable
        start, depth = self.tokens[self.at][1], 0
        while self.at < len(self.tokens):
            token = self.peek()
            if token in ("(", "[", "{"):
                depth += 1
            elif token in (")", "]", "}"):
                if depth == 0:
                    return self.text[start : self.tokens[self.at][1]].strip()
                depth -= 1
            self.at += 1
        raise _Unreadable


# What a value of the old primitive type becomes in the new one, as Terraform
# converts: a number or a bool always converts to a string; a string converts
# to a number or bool only for some strings.
_PRIMITIVE_WIDER = {("number", "string"), ("bool", "string")}


def widening(old: TypeExpr, new: TypeExpr, path: str = "") -> Widening:
    """Whether every value `old` accepted is accepted by `new` (see the module doc)."""
    found = Widening()
    _compare(old, new, path, found)
    return found


def _compare(old: TypeExpr, new: TypeExpr, path: str, out: Widening) -> None:
    at = path or "the type"
    if old == new:
        return
    if new.kind == "any":
        out.add("wider", f"{at}: {old} became any")
        return
    if old.kind == "any":
        out.add("narrower", f"{at}: any became {new}")
        return
    if old.kind in PRIMITIVES and new.kind in PRIMITIVES:
        if (old.kind, new.kind) in _PRIMITIVE_WIDER:
            out.add("wider", f"{at}: {old} became {new} (a {old} converts to a {new})")
        else:
            out.add("narrower", f"{at}: {old} became {new}")
        return
    if old.kind in PRIMITIVES or new.kind in PRIMITIVES:
        out.add("narrower", f"{at}: {old} became {new}")
        return
    if old.kind == new.kind and old.kind in _COLLECTIONS:
        assert old.element is not None and new.element is not None
        _compare(old.element, new.element, f"{path}[*]", out)
        return
    if old.kind == new.kind == "object":
        _objects(old, new, path, out)
        return
    if old.kind == new.kind == "tuple":
        if len(old.elements) != len(new.elements):
            out.add(
                "narrower",
                f"{at}: a tuple of {len(old.elements)} elements became one of {len(new.elements)}",
            )
            return
        for i, (a, b) in enumerate(zip(old.elements, new.elements, strict=True)):
            _compare(a, b, f"{path}[{i}]", out)
        return
    # list <-> set, map <-> object, list <-> tuple, ...: Terraform converts some
    # values of one to the other and not others; which ones callers pass is unknown.
    out.add("unsure", f"{at}: {old} became {new}")


def _objects(old: TypeExpr, new: TypeExpr, path: str, out: Widening) -> None:
    before, after = dict(old.attributes), dict(new.attributes)
    for name, attribute in before.items():
        where = f"{path}.{name}"
        if name not in after:
            # Terraform drops an attribute the type does not name: the caller's
            # value is ignored without an error.
            out.add("narrower", f"{where}: attribute removed")
            continue
        now = after[name]
        if attribute.optional and not now.optional:
            out.add("narrower", f"{where}: attribute made required")
        elif now.optional and not attribute.optional:
            out.add("wider", f"{where}: attribute made optional")
        elif attribute.default != now.default:
            shown = f"{attribute.default or 'null'} became {now.default or 'null'}"
            out.add("changed", f"{where}: default {shown}")
        _compare(attribute.type, now.type, where, out)
    for name, attribute in after.items():
        if name in before:
            continue
        where = f"{path}.{name}"
        if attribute.optional:
            out.add("wider", f"{where}: optional attribute added")
        else:
            out.add("narrower", f"{where}: required attribute added")

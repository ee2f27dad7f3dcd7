"""A small renderer for the subset of Go templates (with Helm's functions) that
deploy/helm/gitreg uses, so the tests render the chart exactly as written.

Helm cannot be installed here, and Jinja2 would need a second copy of every
template. Supported: `{{ }}` with `{{-`/`-}}` trimming, `{{/* comments */}}`,
`if`/`else if`/`else`/`end`, `define`/`include`, pipelines with `|`,
parentheses, `.Field.Path`, `$`, string/number/bool literals, and the
functions in FUNCTIONS. Anything else raises TemplateError, so a template that
uses more of Helm than this supports fails the tests instead of rendering wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml


class TemplateError(Exception):
    """The template uses something this renderer does not support, or is malformed."""


class TemplateFail(Exception):
    """The template called `fail` (or `required` found nothing): rendering is refused."""


ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)
TOKEN = re.compile(r'\s*("(?:\\.|[^"\\])*"|\(|\)|\||-?\d+|\$?\.?[A-Za-z_][\w.]*|\$|\.)')


@dataclass
class Branch:
    condition: str | None  # None: the `else` branch
    body: list[Any] = field(default_factory=list)


@dataclass
class If:
    branches: list[Branch]


@dataclass
class Action:
    pipeline: str


def _lex(source: str) -> list[tuple[str, str]]:
    """Text and action items, with `{{-` / `-}}` whitespace trimming applied."""
    items: list[tuple[str, str]] = []
    position = 0
    trim_next = False
    for match in ACTION.finditer(source):
        text = source[position : match.start()]
        if trim_next:
            text = text.lstrip()
        if match.group(1):
            text = text.rstrip()
        items.append(("text", text))
        if not match.group(2).startswith("/*"):
            items.append(("action", match.group(2)))
        trim_next = bool(match.group(3))
        position = match.end()
    tail = source[position:]
    items.append(("text", tail.lstrip() if trim_next else tail))
    return items


def parse(source: str, defines: dict[str, list[Any]]) -> list[Any]:
    """The node tree of `source`; `define` blocks are added to `defines`."""
    root: list[Any] = []
    stack: list[tuple[str, Any]] = []  # ("if", If) or ("define", name)
    bodies = [root]
    for kind, value in _lex(source):
        if kind == "text":
            bodies[-1].append(value)
            continue
        word, _, rest = value.partition(" ")
        if word == "if":
            node = If([Branch(rest)])
            bodies[-1].append(node)
            stack.append(("if", node))
            bodies.append(node.branches[-1].body)
        elif word == "else":
            if not stack or stack[-1][0] != "if":
                raise TemplateError("else outside if")
            branch = Branch(rest.removeprefix("if ").strip() if rest.startswith("if ") else None)
            stack[-1][1].branches.append(branch)
            bodies[-1] = branch.body
        elif word == "define":
            name = _literal(rest)
            defines[name] = []
            stack.append(("define", name))
            bodies.append(defines[name])
        elif word == "end":
            if not stack:
                raise TemplateError("end without a block")
            stack.pop()
            bodies.pop()
        elif word in ("range", "with", "block", "template", "break", "continue"):
            raise TemplateError(f"unsupported action {word!r}")
        else:
            bodies[-1].append(Action(value))
    if stack:
        raise TemplateError(f"unclosed {stack[-1][0]}")
    return root


def _literal(text: str) -> str:
    if not (text.startswith('"') and text.endswith('"')):
        raise TemplateError(f"expected a string literal, got {text!r}")
    return str(yaml.safe_load(text))


def truthy(value: Any) -> bool:
    """Go templates' truth: false, 0, nil and empty strings, lists and maps are false."""
    return value not in (None, False, 0, "") and not (isinstance(value, list | dict) and not value)


def _to_yaml(value: Any) -> str:
    # Helm's toYaml (sigs.k8s.io/yaml) sorts keys and drops the final newline.
    # Without a stream, safe_dump returns the document as a str (PyYAML ships no types).
    dumped: str = yaml.safe_dump(value, default_flow_style=False, sort_keys=True)
    return dumped.removesuffix("\n")


def _indent(width: int, text: Any) -> str:
    pad = " " * width
    return pad + str(text).replace("\n", "\n" + pad)


def _fail(message: str) -> str:
    raise TemplateFail(message)


def _required(message: str, value: Any) -> Any:
    if not truthy(value):
        raise TemplateFail(message)
    return value


def _printf(form: str, *args: Any) -> str:
    return re.sub(r"%[sdv]", "{}", form).format(*args)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "toYaml": _to_yaml,
    "indent": _indent,
    "nindent": lambda width, text: "\n" + _indent(width, text),
    "quote": lambda value: '"' + str("" if value is None else value).replace('"', '\\"') + '"',
    "default": lambda fallback, value=None: value if truthy(value) else fallback,
    "fail": _fail,
    "required": _required,
    "and": lambda *args: next((a for a in args if not truthy(a)), args[-1]),
    "or": lambda *args: next((a for a in args if truthy(a)), args[-1]),
    "not": lambda value: not truthy(value),
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "gt": lambda a, b: a > b,
    "lt": lambda a, b: a < b,
    "int": lambda value: int(value or 0),
    "printf": _printf,
    "trunc": lambda width, text: str(text)[:width],
    "trimSuffix": lambda suffix, text: str(text).removesuffix(suffix),
    "hasPrefix": lambda prefix, text: str(text).startswith(prefix),
}


class Renderer:
    """Renders templates sharing one set of `define`d templates."""

    def __init__(self) -> None:
        self.defines: dict[str, list[Any]] = {}

    def load_helpers(self, source: str) -> None:
        parse(source, self.defines)

    def render(self, source: str, context: Mapping[str, Any]) -> str:
        return self._nodes(parse(source, self.defines), context, context)

    def _nodes(self, nodes: list[Any], dot: Any, root: Mapping[str, Any]) -> str:
        out = []
        for node in nodes:
            if isinstance(node, str):
                out.append(node)
            elif isinstance(node, Action):
                value = self._pipeline(node.pipeline, dot, root)
                out.append("" if value is None else _text(value))
            else:
                for branch in node.branches:
                    condition = branch.condition
                    if condition is None or truthy(self._pipeline(condition, dot, root)):
                        out.append(self._nodes(branch.body, dot, root))
                        break
        return "".join(out)

    def _pipeline(self, text: str, dot: Any, root: Mapping[str, Any]) -> Any:
        tokens = [t for t in TOKEN.findall(text)]
        if "".join(tokens).replace(" ", "") != text.replace(" ", "").replace("\n", ""):
            raise TemplateError(f"cannot read {text!r}")
        value, rest = self._commands(tokens, dot, root)
        if rest:
            raise TemplateError(f"unbalanced parentheses in {text!r}")
        return value

    def _commands(
        self, tokens: list[str], dot: Any, root: Mapping[str, Any]
    ) -> tuple[Any, list[str]]:
        """Evaluate `cmd | cmd ...` up to a closing parenthesis; the rest of the tokens back."""
        result: Any = None
        first = True
        while tokens:
            words: list[Any] = []
            name = None
            while tokens and tokens[0] not in ("|", ")"):
                token = tokens.pop(0)
                if token == "(":
                    value, tokens = self._commands(tokens, dot, root)
                    if not tokens or tokens.pop(0) != ")":
                        raise TemplateError("missing )")
                    words.append(value)
                elif name is None and not words and token in FUNCTIONS | {"include": None}:
                    name = token
                else:
                    words.append(self._term(token, dot, root))
            if not first:
                words.append(result)
            result = self._call(name, words, root)
            first = False
            if tokens and tokens[0] == "|":
                tokens.pop(0)
                continue
            break
        return result, tokens

    def _call(self, name: str | None, args: list[Any], root: Mapping[str, Any]) -> Any:
        if name is None:
            if len(args) != 1:
                raise TemplateError(f"not a function call: {args!r}")
            return args[0]
        if name == "include":
            return self._nodes(self.defines[args[0]], args[1], root)
        return FUNCTIONS[name](*args)

    def _term(self, token: str, dot: Any, root: Mapping[str, Any]) -> Any:
        if token.startswith('"'):
            return _literal(token)
        if re.fullmatch(r"-?\d+", token):
            return int(token)
        if token in ("true", "false"):
            return token == "true"
        if token.startswith("$"):
            return _field(root, token[1:])
        if token.startswith("."):
            return _field(dot, token)
        raise TemplateError(f"unknown function or value {token!r}")


def _field(value: Any, path: str) -> Any:
    for name in [p for p in path.split(".") if p]:
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        raise TemplateError("a map or list printed without toYaml")
    return str(value)

"""A Terraform module's interface, read from its `.tf` files with python-hcl2.

What is kept: inputs (name, type as written, description,
default, required, sensitive, nullable, OpenTofu's deprecated), outputs (name,
description, sensitive, deprecated), resources and data sources, module calls
(source, version), `moved` and `removed` blocks, and the `required_providers`
and `required_version` of the `terraform` block. A file
that does not parse is reported by name and skipped: the rest of the module
is still described, and publishing never waits on documentation.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitreg.catalog import hcl_plain, hcl_reduce
from gitreg.catalog.lru import SizedLru

if TYPE_CHECKING:  # imported on first parse: python-hcl2 and lark cost a serving
    # worker import time and memory, and only a publish needs them (docs/performance.md)
    from hcl2.utils import SerializationOptions
    from lark import Lark


@functools.cache
def _options() -> SerializationOptions:
    from hcl2.utils import SerializationOptions

    # Quotes stripped so descriptions read as written; types and defaults that are
    # expressions come back as "${...}", which `_expr` unwraps to the source text.
    return SerializationOptions(with_comments=False, strip_string_quotes=True)


def empty_module(path: str) -> dict[str, Any]:
    return {
        "path": path,
        "inputs": [],
        "outputs": [],
        "resources": [],
        "dependencies": [],
        "provider_dependencies": [],
        "required_version": "",
        "moved": [],
        "removed": [],
        "empty": True,
    }


# A python-hcl2 parse of a small file costs about as much as building a
# version's archive; consecutive tags mostly share their .tf files, so parses
# are kept by content (the cache is what keeps extraction within its publish
# budget: docs/performance.md, "Extraction at publish").
# Results are never mutated (add_file only reads them). Large files are not kept.
_CACHE_MAX_TEXT = 64 * 1024
# The cache is bounded by the text it stands for, not by a count: 4,096 entries
# of up to 64 KiB could hold hundreds of MiB in a serving worker that
# published in-process (the per-worker memory target, docs/performance.md). A
# parse takes a few times its text; 2 MiB of text is several hundred typical
# .tf files.
_CACHE_MAX_BYTES = 2 * 1024 * 1024


# A file that does not parse is kept too, with its reason: it fails the same way
# at every tag that has it, and a failed parse costs several times a good one
# (bench/publish.py's synthetic files: 0.37 s of documentation per version, 71 s
# of a 200-tag `repo add`, before).
PARSES: SizedLru[str, dict[str, Any] | str] = SizedLru(
    _CACHE_MAX_BYTES, largest_share=_CACHE_MAX_BYTES // _CACHE_MAX_TEXT
)


def parse_file(text: str) -> dict[str, Any]:
    """The parsed file; raises ValueError with a one-line reason when it is not HCL."""
    outcome = parse_outcome(text, PARSES)
    if isinstance(outcome, str):
        raise ValueError(outcome)
    return outcome


def parse_outcome(text: str, cache: SizedLru[str, dict[str, Any] | str]) -> dict[str, Any] | str:
    """The parse, or why it failed, from `cache` when it has it (sized by the
    text: a parse takes a few times its text, see `_CACHE_MAX_BYTES`)."""
    found = cache.get(text)
    if found is None:  # two job threads may parse the same text at once: harmless
        found = _parse(text)
        cache.put(text, found, len(text))
    return found


@functools.cache
def _parser() -> Lark:
    """python-hcl2's own parser (`hcl2.parser.parser`: its grammar and post-lexer)
    without `propagate_positions`. Positions only serve python-hcl2's
    reconstructor (writing HCL back), never `serialize`; filling them in is a
    third of lark's time (docs/performance.md "Extraction at publish"). Syntax
    errors still carry their line and column: those come from the tokens."""
    import hcl2.parser
    from hcl2.postlexer import PostLexer
    from lark import Lark

    # Building the tables takes 1.4 s, so lark keeps them in a file, beside the
    # one python-hcl2 keeps for its own parser: not in the shared temporary
    # directory, where another user could leave a pickle for us to load.
    tables = Path(hcl2.parser.__file__).parent / ".lark_cache_gitreg.bin"
    return Lark.open(
        "hcl2.lark",
        rel_to=hcl2.parser.__file__,
        parser="lalr",
        propagate_positions=False,
        postlex=PostLexer(),
        cache=str(tables),
    )


def _parse(text: str) -> dict[str, Any] | str:
    # Plain files without lark (hcl_plain.py); most others with python-hcl2's
    # transformer run as lark parses (hcl_reduce.py); the tree's way below for
    # the rest and for every failure, so that the reason reported is the one
    # `hcl2.loads` gives. (In this frame, not a function of its own: how deep the
    # stack already is decides where a RecursionError strikes, and so its message.)
    fast = hcl_plain.parse(text)
    if fast is None:
        fast = hcl_reduce.parse(text, _options())
    if fast is not None:
        return fast
    from hcl2.api import serialize, transform
    from lark.exceptions import LarkError

    try:
        # As `hcl2.loads`, with the newline it adds (lark has no EOF token).
        tree = transform(_parser().parse(text + "\n"))
        loaded = serialize(tree, serialization_options=_options())
    except (LarkError, ValueError, TypeError, KeyError, AttributeError, RuntimeError) as exc:
        # RuntimeError: python-hcl2 raises it for text its grammar accepts but
        # HCL does not ("Attribute x is already defined"), and RecursionError
        # for nesting too deep; neither may stop a publish.
        lines = str(exc).strip().splitlines()
        return lines[0][:200] if lines else type(exc).__name__
    return loaded if isinstance(loaded, dict) else {}


def add_file(module: dict[str, Any], parsed: dict[str, Any]) -> None:
    """Add one parsed file's declarations to `module` (see `empty_module`)."""
    module["empty"] = False
    for name, body in _named(parsed.get("variable")):
        module["inputs"].append(_input(name, body))
    for name, body in _named(parsed.get("output")):
        module["outputs"].append(
            {
                "name": name,
                "description": _text(body.get("description")),
                "sensitive": body.get("sensitive") is True,
                "deprecated": _text(body.get("deprecated")),
            }
        )
    for kind, key in (("resource", "managed"), ("data", "data")):
        for type_, names in _named(parsed.get(kind)):
            for name, _ in _named([names]):
                module["resources"].append({"name": name, "type": type_, "mode": key})
    for name, body in _named(parsed.get("module")):
        module["dependencies"].append(
            {
                "name": name,
                "source": _text(body.get("source")),
                "version": _text(body.get("version")),
            }
        )
    for block in _blocks(parsed.get("terraform")):
        _terraform_block(module, block)
    for block in _blocks(parsed.get("moved")):
        module["moved"].append(
            {"from": _expr(block.get("from", "")), "to": _expr(block.get("to", ""))}
        )
    for block in _blocks(parsed.get("removed")):
        # Terraform destroys what a `removed` block names unless its lifecycle says not to.
        lifecycle = _blocks(block.get("lifecycle"))
        destroy = all(b.get("destroy") is not False for b in lifecycle)
        module["removed"].append({"from": _expr(block.get("from", "")), "destroy": destroy})


def _input(name: str, body: dict[str, Any]) -> dict[str, Any]:
    has_default = "default" in body
    return {
        "name": name,
        "type": _expr(body.get("type", "")),
        "description": _text(body.get("description")),
        "default": _value(body.get("default")) if has_default else None,
        # Terraform: a variable without a default must be set by the caller.
        "required": not has_default,
        "sensitive": body.get("sensitive") is True,
        # Terraform: a variable is nullable unless it says `nullable = false`.
        "nullable": body.get("nullable") is not False,
        "deprecated": _text(body.get("deprecated")),
    }


def _terraform_block(module: dict[str, Any], block: dict[str, Any]) -> None:
    version = block.get("required_version")
    if isinstance(version, str):
        module["required_version"] = version
    for providers in _blocks(block.get("required_providers")):
        for name, spec in providers.items():
            if name.startswith("__"):
                continue
            if isinstance(spec, dict):
                source, constraint = _text(spec.get("source")), _text(spec.get("version"))
            else:  # Terraform 0.12's `aws = "~> 2.0"`
                source, constraint = "", _text(spec)
            module["provider_dependencies"].append(
                {
                    "name": name,
                    "namespace": source.split("/")[-2] if source.count("/") >= 1 else "",
                    "source": source,
                    "version": constraint,
                }
            )


def _blocks(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, dict)]
    return []


def _named(value: Any) -> list[tuple[str, dict[str, Any]]]:
    """(label, body) pairs of labelled blocks such as `variable "x" {}`."""
    found = []
    for block in _blocks(value):
        for label, body in block.items():
            if label.startswith("__"):
                continue
            found.append((label.strip('"'), body if isinstance(body, dict) else {}))
    return found


def _expr(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    if text.startswith("${") and text.endswith("}"):
        return text[2:-1]
    return text


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _value(value: Any) -> Any:
    """A default as JSON: literals as they are, expressions as their source text."""
    if isinstance(value, str):
        return _expr(value)
    if isinstance(value, dict):
        return {k: _value(v) for k, v in value.items() if not k.startswith("__")}
    if isinstance(value, list):
        return [_value(v) for v in value]
    return value

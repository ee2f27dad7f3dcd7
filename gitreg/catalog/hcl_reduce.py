"""python-hcl2's transformer applied while lark parses, without a parse tree.

`hcl2.loads` parses a `.tf` file into a lark tree, walks that tree again with
python-hcl2's `RuleTransformer` to build its rule objects, then serialises
them. Lark can call a transformer's methods as the LALR parser reduces each
rule instead ("transformer - Applies the transformer to every parse tree
(equivalent to applying it after the parse, but faster)", lark's `Lark`
options): the same methods, called on the same children in the same order
(children before their rule), minus the tree and the second walk. That was a
fifth of a parse (docs/performance.md, "Extraction at publish").

Lark cannot do it with python-hcl2's transformer as it is, for three reasons
handled here: its methods take the tree's `meta` (`v_args(meta=True)`), which
lark refuses for an inline transformer, so they are given an empty `Meta`, as
the tree walk gives them without `propagate_positions`; tokens reach them
unconverted, since lark's lexer callbacks must return tokens and the
post-lexer still needs them, so each rule converts its own tokens as
`Transformer._call_userfunc_token` would; and a rule python-hcl2 has no method
for would get a lark `Tree` instead of the tree walk's `__default__`, so when
there is one (another python-hcl2 version) this path is not used at all.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported on first parse, as in hcl.py
    from lark import Lark

# python-hcl2's tree walk recurses twice per level (`_transform_tree` and its
# generator), so it runs out of stack some 500 rule levels down (the depth
# depends on the construct: docs/performance.md, "Extraction at publish"), and
# such a file is a problem in its document; this path does not recurse there
# and might not fail. Rather than depend on where each recursion gives out, a
# result deeper than this is made again the tree's way. Real modules nest a few
# dozen levels.
MAX_DEPTH = 100


def parse(text: str, options: Any) -> dict[str, Any] | None:
    """`text` serialised as `hcl2.loads` would serialise it, or None when this
    path cannot vouch for that (it failed, the file is deeper than MAX_DEPTH, or
    python-hcl2 has a rule this module cannot call inline): the caller then
    parses the tree's way, which also makes any error message exactly python-hcl2's."""
    parser = _parser()
    if parser is None:
        return None
    try:
        # As `hcl2.loads`, with the newline it adds (lark has no EOF token).
        start: Any = parser.parse(text + "\n")  # python-hcl2's StartRule, not a lark Tree
        if _depth(start) > MAX_DEPTH:
            return None
        loaded = start.serialize(options=options)
    except Exception:  # any failure is the tree path's to report, as hcl2.loads would
        return None
    return loaded if isinstance(loaded, dict) else {}


def _depth(start: Any) -> int:
    """How deep python-hcl2's rule tree goes, without recursing."""
    level, rows = 0, [start]
    while rows:
        level += 1
        rows = [c for row in rows for c in getattr(row, "_children", ()) if c is not None]
    return level


@functools.cache
def _parser() -> Lark | None:
    import hcl2.parser
    from hcl2.postlexer import PostLexer
    from lark import Lark

    reducer = _reducer()
    if reducer is None:
        return None
    # The tables hcl.py's parser keeps: a transformer is not part of lark's cache key.
    parser = Lark.open(
        "hcl2.lark",
        rel_to=hcl2.parser.__file__,
        parser="lalr",
        propagate_positions=False,
        postlex=PostLexer(),
        transformer=reducer,
        cache=str(Path(hcl2.parser.__file__).parent / ".lark_cache_gitreg.bin"),
    )
    return parser if _all_rules_called(parser, reducer) else None


def _all_rules_called(parser: Lark, reducer: object) -> bool:
    """Every rule that reaches a transformer has a method: lark inlines rules
    named `_x` (and its own `__x_star_n`) into their parent, and a `?rule` of one
    symbol hands its child up; any other rule would be a lark Tree here."""
    for rule in parser.rules:
        name = str(rule.alias or rule.options.template_source or rule.origin.name)
        inlined = name.startswith("_") or (rule.options.expand1 and len(rule.expansion) == 1)
        if not inlined and not hasattr(reducer, name):
            return False
    return True


class _Reducer:
    """Holds one attribute per rule name (set by `_reducer`), and nothing named
    like a terminal: lark would call that from its lexer."""


def _reducer() -> _Reducer | None:
    from hcl2.transformer import RuleTransformer
    from lark.visitors import _vargs_meta

    rules = RuleTransformer()  # keeps comments, as `hcl2.api.transform` does
    convert = _token_converter(rules)
    reducer = _Reducer()
    for name in dir(RuleTransformer):
        method = getattr(rules, name)
        wrapper = getattr(method, "visit_wrapper", None)
        if name.startswith("_") or wrapper is None:
            continue  # helpers, token methods, lark's own
        if wrapper is not _vargs_meta:
            return None  # a calling convention this module does not mirror
        setattr(reducer, name, _callback(method.base_func, convert))
    return reducer


def _callback(
    method: Callable[..., Any], convert: Callable[[list[Any]], None]
) -> Callable[..., Any]:
    from lark.tree import Meta

    meta = Meta()  # type: ignore[no-untyped-call]  # as a tree without positions has

    def reduce(children: list[Any]) -> Any:
        convert(children)
        return method(meta, children)

    return reduce


def _token_converter(rules: Any) -> Callable[[list[Any]], None]:
    from lark import Token

    default = rules.__default_token__
    by_type: dict[str, Callable[[Any], Any]] = {}

    def convert(children: list[Any]) -> None:
        for i, child in enumerate(children):
            if isinstance(child, Token):
                # As `Transformer._call_userfunc_token`: the method named like
                # the terminal, else `__default_token__`.
                found = by_type.get(child.type)
                if found is None:
                    found = by_type.setdefault(child.type, getattr(rules, child.type, default))
                children[i] = found(child)

    return convert

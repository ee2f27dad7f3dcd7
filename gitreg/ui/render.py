"""Templates, HCL highlighting and static assets, loaded on the first page.

Jinja2 and Pygments (memory and import time) are imported here and nowhere
else, inside `Renderer.create`: a worker that only answers `terraform init`
never imports them (docs/performance.md, "Web UI"). Autoescape is on for
every template, so data reaches the page as text unless a template marks it
`|safe`; only HTML made safe before it got here is: README/CHANGELOG HTML
sanitised at publish (gitreg/catalog/readme.py) and Pygments' output, which
escapes the code it highlights.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import Environment
    from markupsafe import Markup
    from pygments.formatter import Formatter
    from pygments.lexer import Lexer

HERE = Path(__file__).resolve().parent
STATIC_DIR = HERE / "static"
TEMPLATE_DIR = HERE / "templates"
STATIC_FILES = ("style.css", "ui.js", "favicon.svg")
STATIC_PREFIX = "/ui/static"


def static_assets() -> dict[str, tuple[str, bytes]]:
    """file name -> (content hash, bytes). The hash is in the URL, so the files
    can be cached for a year and a new release is fetched at once."""
    found = {}
    for name in STATIC_FILES:
        data = (STATIC_DIR / name).read_bytes()
        found[name] = (hashlib.sha256(data).hexdigest()[:16], data)
    return found


_BACKTICKS = re.compile(r"`([^`\n]+)`")


def inline_code(text: str) -> Markup:
    """A variable's or output's description with its `backticks` as code, as
    the public registry shows them: escaped first, so only <code> is added."""
    from markupsafe import Markup, escape

    parts = _BACKTICKS.split(text)  # text, code, text, code, ..., text
    code = Markup("<code>{}</code>")
    return Markup("").join(code.format(p) if i % 2 else escape(p) for i, p in enumerate(parts))


@dataclass(frozen=True)
class Renderer:
    env: Environment
    lexer: Lexer
    formatter: Formatter
    assets: dict[str, tuple[str, bytes]]

    @classmethod
    def create(cls) -> Renderer:
        from jinja2 import Environment, FileSystemLoader, StrictUndefined
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import TerraformLexer

        env = Environment(
            loader=FileSystemLoader(TEMPLATE_DIR),
            autoescape=True,  # every template, whatever its file name
            undefined=StrictUndefined,  # a misspelt field fails the tests, not the reader
            trim_blocks=True,
            lstrip_blocks=True,
        )
        assets = static_assets()
        renderer = cls(env, TerraformLexer(), HtmlFormatter(nowrap=True), assets)
        env.globals["static"] = renderer.static_url
        env.filters["hcl"] = renderer.highlight
        env.filters["inline_code"] = inline_code
        return renderer

    def static_url(self, name: str) -> str:
        return f"{STATIC_PREFIX}/{self.assets[name][0]}/{name}"

    def highlight(self, code: str) -> str:
        """HCL as highlighted HTML; Pygments escapes the code, so templates
        may mark the result `|safe`."""
        from pygments import highlight

        return str(highlight(code, self.lexer, self.formatter))

    def page(self, template: str, context: dict[str, Any]) -> bytes:
        return self.env.get_template(template).render(context).encode("utf-8")

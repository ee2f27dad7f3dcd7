"""An XSS corpus through every place the UI prints data: READMEs,
descriptions, variable descriptions and defaults, output descriptions, tag
names, module calls and the search query echoed back. No page may carry
executable markup: no script element but our own `src` one, no event handler
attribute, no `javascript:`/`data:` link."""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser
from urllib.parse import quote

from tests.support.gitrepo import GitRepo
from tests.ui.conftest import Ui, publish

PAYLOADS = (
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '"><svg onload=alert(1)>',
    "'><iframe src=javascript:alert(1)>",
    "</textarea><script>alert(1)</script>",
    "{{ 7*7 }}{% raw %}",
)
README = "\n\n".join(
    [
        "# Evil <script>alert(1)</script>",
        *PAYLOADS,
        "[x](javascript:alert(1)) [y](data:text/html,<script>alert(1)</script>)",
        '<a href="javascript:alert(1)" onclick="alert(1)">hi</a>',
        '```hcl\nvariable "x" { default = "</code><script>alert(1)</script>" }\n```',
    ]
)


def _variables() -> str:
    blocks = []
    for i, payload in enumerate(PAYLOADS):
        text = payload.replace("\\", "\\\\").replace('"', '\\"')
        blocks.append(
            f'variable "v{i}" {{\n  description = "{text}"\n  type = string\n}}\n'
            f'variable "d{i}" {{\n  default = "{text}"\n}}\n'
            f'output "o{i}" {{\n  value = 1\n  description = "{text}"\n}}\n'
            f'module "m{i}" {{\n  source = "./x{i}"\n  version = "{text}"\n}}\n'
        )
    return "\n".join(blocks)


class _Elements(HTMLParser):
    """Every element and attribute as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}))


def assert_inert(html: str, where: str) -> None:
    parser = _Elements()
    parser.feed(html)
    for tag, attrs in parser.found:
        if tag == "script":
            assert set(attrs) == {"src", "defer"}, (where, attrs)
            assert re.fullmatch(r"/ui/static/[0-9a-f]{16}/ui\.js", attrs["src"]), where
        assert tag not in ("iframe", "svg", "object", "embed", "textarea", "base"), (where, tag)
        assert not [a for a in attrs if a.startswith("on")], (where, tag, attrs)
        for name in ("href", "src", "action", "formaction"):
            url = re.sub(r"[\x00-\x20]", "", attrs.get(name, ""))
            scheme = url.split(":", 1)[0].lower()
            assert ":" not in url or scheme in ("http", "https", "mailto"), (where, url)


def test_the_corpus_renders_inert_on_every_page(
    ui: Ui, make_repo: Callable[[str], GitRepo]
) -> None:
    repo = make_repo("evil")
    repo.write("main.tf", _variables())
    repo.write("README.md", README)
    repo.write(
        "modules/<b>sub/main.tf", 'variable "x" {\n  description = "<script>alert(2)</script>"\n}\n'
    )
    repo.write('examples/"onload=x/main.tf', "# example\n")
    repo.commit()
    repo.tag("v1.0.0-<script>")  # not a version: never shown
    repo.tag("v1.0.0-rc.1+evil")
    repo.tag("v1.0.0")
    publish(ui.svc, repo, "acme", "evil", "aws")
    assert ui.client.get("/modules/acme/evil/aws/1.0.0-rc.1+evil").status_code == 200
    pages = ["/", "/modules/acme", "/modules/acme/evil/aws/1.0.0-rc.1+evil"]
    pages += [
        f"/modules/acme/evil/aws?tab={t}"
        for t in (
            "readme",
            "inputs",
            "outputs",
            "dependencies",
            "submodules",
            "examples",
            "versions",
        )
    ]
    pages += [f"/search?q={quote(p)}" for p in PAYLOADS] + ["/search?q=evil"]
    pages += [f"/modules/{quote(p, safe='')}/x/aws" for p in PAYLOADS]
    for path in pages:
        page = ui.client.get(path)
        assert page.status_code in (200, 404), path
        assert_inert(page.text, path)
    readme = ui.client.get("/modules/acme/evil/aws").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in readme  # shown as text
    assert "{{ 7*7 }}" in readme  # data is never run as a template
    assert "v1.0.0-&lt;script&gt;" not in readme and "1.0.0-rc.1+evil" in readme
    echoed = ui.client.get("/search?q=" + quote('"><svg onload=alert(1)>')).text
    assert 'value="&#34;&gt;&lt;svg onload=alert(1)&gt;"' in echoed

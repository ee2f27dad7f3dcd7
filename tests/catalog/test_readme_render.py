"""READMEs rendered as their authors wrote them (gitreg/catalog/readme.py):
the HTML they put in kept once sanitised, comments dropped, heading ids
scoped, alignment as classes, relative links into the version's pages."""

from __future__ import annotations

import re

from gitreg.catalog.readme import FOLD_ROWS_OVER, ROWS_SHOWN, Links, first_prose, render, slugify
from tests.catalog.test_extraction import assert_safe
from tests.support.readmes import PROVIDER_DOC_PAGE, TERRAFORM_DOCS_README
from tests.ui.test_ui_xss import PAYLOADS, assert_inert

PAGE = "/modules/acme/network/aws/1.2.0"
LINKS = Links("", "https://git.example.com/acme/network", "c0ffee", PAGE, "")


def test_a_terraform_docs_readme_renders_as_written() -> None:
    html = render(TERRAFORM_DOCS_README, LINKS)
    assert '<p align="center">' in html
    assert f'<img src="{PAGE}/raw/docs/logo.png" width="120" alt="Network logo">' in html
    assert "<details>\n<summary>Advanced settings</summary>" in html
    assert "<strong>pinned</strong>" in html
    assert "<!--" not in html and "BEGIN_TF_DOCS" not in html  # comments dropped
    assert "&lt;" not in html  # no HTML printed as text


def test_heading_ids_and_anchors_are_scoped_and_fragments_follow() -> None:
    html = render(TERRAFORM_DOCS_README, LINKS)
    assert '<h2 id="readme-usage">Usage</h2>' in html
    assert '<a href="#readme-usage"' in html
    assert '<a name="readme-input_cidr"' in html and 'href="#readme-input_cidr"' in html
    ids = re.findall(r'\b(?:id|name)="([^"]*)"', html)
    assert ids and all(i.startswith("readme-") for i in ids)
    changelog = render("## Added\n\n[see](#added)", LINKS, "changelog-")
    assert 'id="changelog-added"' in changelog and 'href="#changelog-added"' in changelog


def test_repeated_headings_get_distinct_ids() -> None:
    html = render("## Example\n\n## Example\n\n## Inputs & outputs", LINKS)
    assert 'id="readme-example"' in html and 'id="readme-example-1"' in html
    assert slugify("Inputs & outputs") == "inputs--outputs"


def test_table_alignment_is_classes_never_inline_style() -> None:
    html = render(TERRAFORM_DOCS_README, LINKS)
    assert '<th class="align-center">Required</th>' in html
    assert "style=" not in html
    kept = render('<table><tr><td align="right" style="color:red">1</td></tr></table>', LINKS)
    assert '<td align="right">1</td>' in kept
    assert "align=" not in render('<p align="javascript:x">x</p>', LINKS)
    assert "class=" not in render('<p class="notice">x</p><td class="align-left">', LINKS)


def _table(rows: int) -> str:
    body = "".join(f'| <a name="input_{i}"></a> input{i} | {i} |\n' for i in range(rows))
    return "| Name | Value |\n|------|------:|\n" + body + "\nAfter the table.\n"


def test_a_long_table_shows_its_first_rows_and_folds_the_others_under_its_header() -> None:
    html = render(_table(FOLD_ROWS_OVER + 1), LINKS)
    shown, rest = html.split("<details>")
    assert shown.count("<tr>") == 1 + ROWS_SHOWN  # the header and the first rows
    summary = f"<summary>Rows {ROWS_SHOWN + 1} to {FOLD_ROWS_OVER + 1} of this table</summary>"
    assert rest.startswith(summary)
    folded, after = rest.split("</details>")
    header = '<th>Name</th>\n<th class="align-right">Value</th>'
    assert header in shown and header in folded
    assert folded.count("<tr>") == 1 + FOLD_ROWS_OVER + 1 - ROWS_SHOWN
    assert f'name="readme-input_{ROWS_SHOWN}"' in folded  # anchors keep their scope
    assert f'<td class="align-right">{FOLD_ROWS_OVER}</td>' in folded
    assert "After the table." in after
    assert "<details>" not in render(_table(FOLD_ROWS_OVER), LINKS)


def test_relative_links_open_the_version_in_the_registry() -> None:
    html = render(TERRAFORM_DOCS_README, LINKS)
    assert f'href="{PAGE}/examples/complete"' in html
    assert f'href="{PAGE}/modules/subnets"' in html
    assert f'href="{PAGE}/files/docs/design.md"' in html
    assert f'src="{PAGE}/raw/docs/diagram.svg"' in html  # an SVG only ever as an image
    nested = render("[up](../../README.md) ![i](/docs/a.png)", Links("modules/s", page=PAGE))
    assert f'href="{PAGE}/files/README.md"' in nested
    assert f'src="{PAGE}/raw/docs/a.png"' in nested
    # A monorepo module: the repository outside it is the forge's, at the commit.
    mono = Links("mods/vpc", "https://git.example.com/acme/mono", "c0ffee", PAGE, "mods/vpc")
    html = render("[lic](../../LICENSE) [ex](examples/a)", mono)
    assert 'href="https://git.example.com/acme/mono/blob/c0ffee/LICENSE"' in html
    assert f'href="{PAGE}/examples/a"' in html
    assert "<a " not in render("[x](../../../../etc)", mono).replace('<a rel="', "")


def test_sizes_are_kept_only_as_plain_numbers() -> None:
    html = render('<img src="a.png" width="50%" height="expression(alert(1))">', LINKS)
    assert 'width="50%"' in html and "height" not in html


def test_hcl_blocks_are_highlighted_with_classes_only() -> None:
    html = render(PROVIDER_DOC_PAGE.split("---\n", 2)[2], Links(), "doc-")
    assert '<pre class="hl"><code><span class="kr">resource</span>' in html
    assert "schema generated" not in html and 'id="doc-schema"' in html


def test_a_description_is_the_first_paragraph_of_prose() -> None:
    html = render(TERRAFORM_DOCS_README, LINKS)
    assert first_prose(html) == "Builds the platform network, its subnets and routes."
    assert first_prose(render("Tom &amp; Jerry", LINKS)) == "Tom & Jerry"


def test_the_xss_corpus_stays_inert() -> None:
    corpus = [
        *PAYLOADS,
        '<a href="javascript:alert(1)" onclick="alert(1)">x</a>',
        '<a href="JaVa&#x09;ScRiPt:alert(1)">x</a>',
        '<img src="data:image/svg+xml;base64,PHN2Zz4=">',
        "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
        "<details open ontoggle=alert(1)><summary>x</summary></details>",
        '<form action="https://evil"><input name=x><button>go</button></form>',
        '<object data="x.swf"></object><embed src="x"><base href="https://evil/">',
        '<meta http-equiv="refresh" content="0;url=https://evil">',
        '<a href="#x" id="main">hijack the page\'s own id</a>',
        "<!-- <script>alert(1)</script> --><![CDATA[<script>alert(1)</script>]]>",
        '<div style="background:url(javascript:alert(1))">x</div>',
        '<p align="center" onmouseover="alert(1)">x</p>',
    ]
    for payload in corpus:
        html = render(payload, LINKS)
        assert_inert(html, payload)
        assert_safe(html)
        assert not re.search(r"<(script|style|form|input|meta|object|embed|base)\b", html), html
        assert 'id="main"' not in html and "style=" not in html, html

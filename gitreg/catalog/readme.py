"""README and CHANGELOG rendering: Markdown, with the HTML authors put in it,
to HTML that is safe to embed.

markdown-it-py renders the Markdown with raw HTML allowed, then nh3 (a
maintained allow-list sanitiser) keeps only the elements and attributes in
`_TAGS`/`_ATTRIBUTES`: no script, style, event handler, form or frame, no
`javascript:`/`data:` URL, no inline style, no comment. What the page needs
from it is set here, never taken from the author:

- headings get ids from their text (GitHub's rules), and every `id`, `<a
  name>` and `#fragment` is prefixed with the document's scope (`readme-`),
  so a README's own table of contents works and can never clash with the
  page's ids;
- table alignment becomes an `align-*` class (the page's policy forbids
  inline styles); HTML `align` attributes are kept only with a known value;
- code fenced as HCL/Terraform is highlighted with Pygments' classes;
- a Markdown table longer than `FOLD_ROWS_OVER` rows shows its first
  `ROWS_SHOWN`; the others follow, under the same header, in a closed
  `<details>`. Browsers lay out a closed `<details>` only when it opens, and
  open it for find-in-page and for a link to an anchor inside it, so a
  generated table of a thousand inputs neither stalls a phone at load nor
  hides anything;
- relative links and images are resolved by `Links`: inside a module's own
  tree to its pages at that version (a file view, a raw image, a submodule's
  or example's page), elsewhere in the repository to the forge at the commit,
  and dropped where neither is known.
"""

from __future__ import annotations

import functools
import posixpath
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from html import unescape
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote, urlsplit

if TYPE_CHECKING:  # imported on first use: a serving worker that never
    # publishes does not pay its import time and memory (docs/performance.md)
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

# Schemes a link may use; everything else (javascript:, data:, vbscript:,
# file:, ...) is refused, so the text stays but the link is not made.
_SAFE_SCHEMES = {"http", "https", "mailto"}
_SCHEME = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.\-]*):")
_CONTROL = re.compile(r"[\x00-\x20\x7f]+")
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_TAGS = _HEADINGS | {
    "a", "abbr", "b", "blockquote", "br", "caption", "cite", "code", "dd", "del", "details",
    "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "hr", "i", "img", "ins", "kbd",
    "li", "mark", "ol", "p", "pre", "q", "rp", "rt", "ruby", "s", "samp", "small", "span",
    "strike", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th",
    "thead", "tr", "tt", "u", "ul", "var", "wbr",
}  # fmt: skip
_ATTRIBUTES = {
    "a": {"href", "name", "title"},
    "img": {"src", "alt", "title", "width", "height"},
    "abbr": {"title"},
    "details": {"open"},
    "ol": {"start", "reversed"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan", "scope"},
    **{h: {"id"} for h in _HEADINGS},
}
_ALIGNED = ("p", "div", "img", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6", "table")
_ALIGN_VALUES = {"left", "center", "right"}
_ALIGN_CLASSES = {f"align-{a}" for a in _ALIGN_VALUES}
_SIZE = re.compile(r"^[0-9]{1,4}(%|px)?$")
_TEXT_ALIGN = re.compile(r"text-align:\s*(left|center|right)")
_HIGHLIGHTED = {"hcl", "terraform", "tf", "hcl2", "opentofu", "tofu"}
_MAX_HIGHLIGHT = 64 * 1024
FOLD_ROWS_OVER = 200
ROWS_SHOWN = 100
# Link kinds: what a relative URL is resolved for.
LINK, IMAGE = "blob", "raw"


def _safe_link(url: str) -> bool:
    # Browsers drop tabs, newlines and other controls inside a scheme
    # ("java\tscript:"), so they are removed before the scheme is read.
    cleaned = _CONTROL.sub("", url)
    match = _SCHEME.match(cleaned)
    return match is None or match.group(1).lower() in _SAFE_SCHEMES


def _highlight(code: str, lang: str, _attrs: str) -> str:
    """HCL fenced blocks as Pygments' spans (escaped by Pygments); "" lets
    markdown-it escape any other block as it is."""
    if lang.lower() not in _HIGHLIGHTED or len(code) > _MAX_HIGHLIGHT:
        return ""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import TerraformLexer

    body = highlight(code, TerraformLexer(), HtmlFormatter(nowrap=True))
    return f'<pre class="hl"><code>{body}</code></pre>\n'


@functools.cache
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    options = {"html": True, "linkify": False, "highlight": _highlight}
    md = MarkdownIt("commonmark", options).enable(["table", "strikethrough"])
    # markdown-it-py documents replacing this hook on the instance.
    md.validateLink = _safe_link  # type: ignore[method-assign]
    return md


@functools.cache
def _span_classes() -> frozenset[str]:
    """The short class names Pygments' HtmlFormatter writes."""
    from pygments.token import STANDARD_TYPES

    return frozenset(c for c in STANDARD_TYPES.values() if c)


def web_url(remote: str) -> str:
    """The browsable https address of a git remote, or "" when it has none
    (local paths, file://): `git@host:a/b.git` and `https://host/a/b.git`
    both give `https://host/a/b`."""
    scp = re.match(r"^[\w.\-]+@([\w.\-]+):(?!//)(.+)$", remote)
    if scp:
        host, path = scp.group(1), scp.group(2)
    else:
        parts = urlsplit(remote)
        if parts.scheme not in ("https", "http", "ssh", "git") or not parts.hostname:
            return ""
        host = parts.hostname + (
            f":{parts.port}" if parts.scheme.startswith("http") and parts.port else ""
        )
        path = parts.path
    path = path.strip("/").removesuffix(".git")
    return f"https://{host}/{path}" if path else ""


@dataclass(frozen=True)
class Links:
    """Where a document's relative links and images go.

    `directory` is the document's directory inside the repository. With
    `page` (a module version's UI path) and `root` (the module's directory in
    the repository: its archive's root), what lies under `root` opens in the
    registry at that version; with `forge` and `commit`, the rest of the
    repository opens at the forge at that commit; anything else is dropped."""

    directory: str = ""
    forge: str = ""
    commit: str = ""
    page: str = ""
    root: str = ""

    def resolve(self, url: str, kind: str) -> str | None:
        if not url or _SCHEME.match(_CONTROL.sub("", url)) or url.startswith(("#", "//")):
            return url  # absolute: its scheme is checked by the sanitiser
        parts = urlsplit(url)
        start = "" if url.startswith("/") else self.directory
        path = posixpath.normpath(posixpath.join(start, unquote(parts.path).lstrip("/")))
        if path == ".." or path.startswith("../"):
            return None
        if self.page and _under(path, self.root):
            inside = posixpath.relpath(path, self.root) if self.root else path
            return self._page_url(inside, kind)
        if self.forge and self.commit:
            fragment = f"#{parts.fragment}" if parts.fragment else ""
            return f"{self.forge}/{kind}/{self.commit}/{quote(path)}{fragment}"
        return None

    def _page_url(self, inside: str, kind: str) -> str:
        if inside == ".":
            return self.page
        if kind == IMAGE:
            return f"{self.page}/raw/{quote(inside)}"
        nested = _NESTED.fullmatch(inside)
        if nested is not None:
            return f"{self.page}/{nested.group(1)}/{quote(nested.group(2), safe='')}"
        return f"{self.page}/files/{quote(inside)}"


# A submodule's or example's directory (no extension: `examples/a.tf` is a
# file), or its README: their pages.
_NESTED = re.compile(r"(modules|examples)/([^/.]+)(?:/(?:README(?:\.md|\.markdown)?)?)?")


def _under(path: str, root: str) -> bool:
    return not root or path == root or path.startswith(root + "/")


# Consecutive tags mostly share their READMEs, and only the commit and the
# version's page in resolved links differ: a README is rendered once with
# unguessable stand-ins for them, which are then replaced (bench/catalog.py:
# about a third of the documentation time per version). Large texts are not kept.
_COMMIT = secrets.token_hex(20)
_PAGE = "/" + secrets.token_hex(16)
_CACHE_MAX_TEXT = 64 * 1024
SCOPE = "readme-"


def render(text: str, links: Links | None = None, scope: str = SCOPE) -> str:
    """`text` as sanitised HTML, its ids prefixed with `scope`."""
    links = links or Links()
    if len(text) > _CACHE_MAX_TEXT or not (links.commit or links.page):
        return _render(text, links, scope)
    stand_in = replace(
        links, commit=_COMMIT if links.commit else "", page=_PAGE if links.page else ""
    )
    html = _render_cached(text, stand_in, scope)
    return html.replace(_COMMIT, links.commit).replace(_PAGE, links.page)


@functools.lru_cache(maxsize=256)
def _render_cached(text: str, links: Links, scope: str) -> str:
    return _render(text, links, scope)


def _render(text: str, links: Links, scope: str) -> str:
    import nh3

    md = _markdown()
    tokens = _fold_long_tables(md.parse(text))
    _prepare(tokens)
    html = str(md.renderer.render(tokens, md.options, {}))
    classes = {"td": _ALIGN_CLASSES, "th": _ALIGN_CLASSES, "pre": {"hl"}, "span": _span_classes()}
    return nh3.clean(
        html,
        tags=_TAGS,
        clean_content_tags={"script", "style", "textarea", "title", "noscript", "template"},
        attributes=_ATTRIBUTES,
        attribute_filter=_Filter(links, scope),
        strip_comments=True,
        link_rel="noopener noreferrer",
        url_schemes=_SAFE_SCHEMES,
        allowed_classes=classes,
        tag_attribute_values={tag: {"align": _ALIGN_VALUES} for tag in _ALIGNED},
    )


class _Filter:
    """nh3's attribute hook: scopes ids and fragments, resolves relative
    URLs, keeps only plain sizes. None drops the attribute."""

    def __init__(self, links: Links, scope: str) -> None:
        self._links, self._scope = links, scope

    def __call__(self, element: str, attribute: str, value: str) -> str | None:
        if attribute in ("id", "name"):
            return self._scope + value if value.strip() else None
        if attribute == "href":
            if value.startswith("#"):
                return "#" + self._scope + value[1:] if len(value) > 1 else None
            return self._links.resolve(value, LINK)
        if attribute == "src":
            return self._links.resolve(value, IMAGE)
        if attribute in ("width", "height"):
            return value.strip() if _SIZE.match(value.strip()) else None
        return value


def _prepare(tokens: Sequence[Token]) -> None:
    """Heading ids from their text; table alignment as classes."""
    seen: dict[str, int] = {}
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and i + 1 < len(tokens):
            slug = slugify(_text(tokens[i + 1]))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            token.attrSet("id", slug if count == 0 else f"{slug}-{count}")
        elif token.type in ("th_open", "td_open"):
            style = str(token.attrs.pop("style", ""))
            aligned = _TEXT_ALIGN.search(style)
            if aligned is not None:
                token.attrSet("class", f"align-{aligned.group(1)}")


def _fold_long_tables(tokens: list[Token]) -> list[Token]:
    """Each table's rows after the first `ROWS_SHOWN`, when it has more than
    `FOLD_ROWS_OVER`, moved to a second table with the same header inside a
    closed `<details>` that follows the first."""
    from markdown_it.token import Token

    folded: list[Token] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.type != "table_open":
            folded.append(token)
            i += 1
            continue
        end = next(j for j in range(i, len(tokens)) if tokens[j].type == "table_close")
        table = tokens[i : end + 1]
        rows = [
            k for k, t in enumerate(table) if t.type == "tr_open" and t.level == token.level + 2
        ]
        body = next((k for k, t in enumerate(table) if t.type == "tbody_open"), None)
        body_rows = [k for k in rows if body is not None and k > body]
        if body is None or len(body_rows) <= FOLD_ROWS_OVER:
            folded.extend(table)
            i = end + 1
            continue
        cut = body_rows[ROWS_SHOWN]
        opening = [t.copy() for t in table[: body + 1]]  # table, header, tbody
        closing = [t.copy() for t in table[-2:]]  # tbody and table closed
        summary = f"Rows {ROWS_SHOWN + 1:,} to {len(body_rows):,} of this table"
        folded += table[:cut] + closing
        folded.append(
            Token("html_block", "", 0, content=f"<details><summary>{summary}</summary>\n")
        )
        folded += opening + table[cut:]
        folded.append(Token("html_block", "", 0, content="</details>\n"))
        i = end + 1
    return folded


def _text(inline: Token) -> str:
    return "".join(c.content for c in inline.children or () if c.type in ("text", "code_inline"))


_NOT_SLUG = re.compile(r"[^\w\- ]", re.UNICODE)


def slugify(text: str) -> str:
    """A heading's id as GitHub makes it: lower case, punctuation dropped,
    spaces as hyphens (`## Inputs & outputs` -> `inputs--outputs`)."""
    return _NOT_SLUG.sub("", text.strip().lower()).replace(" ", "-") or "section"


def plain_text(html_text: str) -> str:
    """The words of rendered HTML, for the search index."""
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]*>", " ", html_text)).strip())


_PARAGRAPH = re.compile(r"<p(?:\s[^>]*)?>(.*?)</p>", re.DOTALL)


def first_prose(html_text: str) -> str:
    """The text of the first paragraph with words in it: a README that opens
    with a logo or a line of badges is described by what follows them."""
    for match in _PARAGRAPH.finditer(html_text):
        words = plain_text(match.group(1))
        if any(ch.isalpha() for ch in words):
            return words
    return ""


_HEADING = re.compile(r"^(#{1,3})\s+\[?v?([0-9][^\]\s]*)\]?", re.MULTILINE)


def changelog_section(text: str, version: str) -> str:
    """The CHANGELOG section whose heading names `version` ("## 1.2.0",
    "## [v1.2.0] - date", Keep a Changelog style), or ""."""
    headings = list(_HEADING.finditer(text))
    for i, match in enumerate(headings):
        if match.group(2) == version:
            level = len(match.group(1))
            end = len(text)
            for later in headings[i + 1 :]:
                if len(later.group(1)) <= level:
                    end = later.start()
                    break
            body = text[match.start() : end].split("\n", 1)
            return body[1].strip() if len(body) > 1 else ""
    return ""

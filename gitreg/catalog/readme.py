"""README and CHANGELOG rendering: Markdown to HTML that is safe to embed.

A page shows no script, no event handlers and no `javascript:` URLs.
markdown-it-py with `html=False` escapes every raw HTML tag, so a README can
never add elements or attributes of its own; the only attributes it produces
are `href` and `src`, which pass `_safe_link` (its `validateLink` hook) and are
resolved against the repository at the published commit when they are
relative.
"""

from __future__ import annotations

import functools
import posixpath
import re
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:  # imported on first use: a serving worker that never
    # publishes does not pay its import time and memory (docs/performance.md)
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

# Schemes a link may use; everything else (javascript:, data:, vbscript:,
# file:, ...) is refused, so the text stays but the link is not made.
_SAFE_SCHEMES = {"http", "https", "mailto"}
_SCHEME = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.\-]*):")
_CONTROL = re.compile(r"[\x00-\x20\x7f]+")


def _safe_link(url: str) -> bool:
    # Browsers drop tabs, newlines and other controls inside a scheme
    # ("java\tscript:"), so they are removed before the scheme is read.
    cleaned = _CONTROL.sub("", url)
    match = _SCHEME.match(cleaned)
    return match is None or match.group(1).lower() in _SAFE_SCHEMES


@functools.cache
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    # markdown-it-py documents replacing this hook on the instance.
    md.validateLink = _safe_link  # type: ignore[method-assign]
    return md


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


class _Resolver:
    """Rewrites relative `href`/`src` to the file at the published commit."""

    def __init__(self, base: str, commit: str, directory: str) -> None:
        self._base, self._commit, self._directory = base, commit, directory

    def __call__(self, url: str, kind: str) -> str:
        if not url or url.startswith(("#", "/")) or _SCHEME.match(url) or url.startswith("//"):
            return url
        path = posixpath.normpath(posixpath.join(self._directory, url))
        if path.startswith(".."):
            return url  # outside the repository: left as written (still safe)
        return f"{self._base}/{kind}/{self._commit}/{path.lstrip('./')}"


# Consecutive tags mostly share their READMEs, and only the commit in resolved
# links differs: a README is rendered once with this unguessable stand-in for
# the commit, which is then replaced (bench/catalog.py: about a third of the
# documentation time per version). Large texts are not kept.
_COMMIT = secrets.token_hex(20)
_CACHE_MAX_TEXT = 64 * 1024


def render(text: str, source: str = "", commit: str = "", directory: str = "") -> str:
    """`text` as HTML; relative links resolved when `source` is a web URL."""
    if not (source and commit):
        return _render(text, "", "", directory)
    if len(text) > _CACHE_MAX_TEXT:
        return _render(text, source, commit, directory)
    return _render_cached(text, source, directory).replace(_COMMIT, commit)


@functools.lru_cache(maxsize=256)
def _render_cached(text: str, source: str, directory: str) -> str:
    return _render(text, source, _COMMIT, directory)


def _render(text: str, source: str, commit: str, directory: str) -> str:
    md = _markdown()
    tokens = md.parse(text)
    if source and commit:
        _resolve(tokens, _Resolver(source, commit, directory))
    return str(md.renderer.render(tokens, md.options, {}))


def _resolve(tokens: Sequence[Token], resolver: _Resolver) -> None:
    for token in tokens:
        if token.children:
            _resolve(token.children, resolver)
        if token.type == "link_open":
            _set(token, "href", resolver(str(token.attrGet("href") or ""), "blob"))
        elif token.type == "image":
            _set(token, "src", resolver(str(token.attrGet("src") or ""), "raw"))


def _set(token: Token, name: str, value: Any) -> None:
    token.attrSet(name, value)


def plain_text(html_text: str) -> str:
    """The words of rendered HTML, for the search index."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]*>", " ", html_text)).strip()


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

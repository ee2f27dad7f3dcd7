"""A provider release's documentation pages, rendered at ingest.

Each page of the release's `docs/` folder (provider_tree.py reads them) is
rendered with the README renderer (readme.py: HTML sanitised, unsafe link
schemes refused, relative links resolved against the repository at the
release's commit). Its YAML front matter is read for `page_title`,
`subcategory` and `description`, never rendered. The entries follow the
public registry's v1 `docs` list: `id`, `title`, `path`, `slug`, `category`,
`subcategory`, `language`; `id` is `CATEGORY-SLUG`, stable across versions
and safe in a URL path segment.

`ProviderDocumenter` runs after a release is published from a forge (and
from `gitreg reindex`): it fetches the provider's repository into its mirror,
finds the release's tag and stores the pages once with the version, like its
packages. A failure is logged and leaves the version undocumented for
`gitreg reindex` to retry; publishing never waits on documentation.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitreg.catalog.provider_tree import read_provider_docs
from gitreg.catalog.readme import Links, render, web_url
from gitreg.catalog.store import DocPage, ProviderDocsIndex
from gitreg.errors import GitError, GitregError
from gitreg.git.backend import GitBackend
from gitreg.providers.store import ProviderIndex, ProviderRecord, ProviderVersionRecord
from gitreg.storage.records import RepoRecord

log = logging.getLogger("gitreg.catalog")

PROVIDER_DOCS_FORMAT = 2  # 2: the pages' HTML kept (sanitised), code highlighted
MAX_HTML_BYTES = 2 * 1024 * 1024  # rendered HTML is bounded too (it grows from Markdown)
MAX_RELEASE_HTML_BYTES = 32 * 1024 * 1024  # and so is a release's total
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_FIELD = re.compile(r"^([A-Za-z_]+)[ \t]*:[ \t]*(.*?)[ \t]*$", re.MULTILINE)
_SUFFIX = re.compile(r"(\.html)?\.(md|markdown)$", re.IGNORECASE)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


def front_matter(text: str) -> tuple[dict[str, str], str]:
    """(fields, body): the `key: value` lines of a leading `---` block.

    Only flat scalar fields are read (page_title, subcategory, description);
    a hand-written reader is enough for them and needs no YAML dependency,
    which would also accept anchors and tags from untrusted input."""
    match = _FRONT.match(text)
    if match is None:
        return {}, text
    fields = {}
    for key, value in _FIELD.findall(match.group(1)):
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        fields[key.lower()] = value[:300]
    return fields, text[match.end() :]


def slug_of(path: str) -> str:
    """`docs/resources/instance.md` -> `instance`, URL-safe."""
    name = _SUFFIX.sub("", posixpath.basename(path))
    return _UNSAFE.sub("_", name).strip(".") or "page"


@dataclass(frozen=True)
class Release:
    """Where a provider version's pages come from."""

    remote: str
    commit: str


def build_pages(
    files: list[tuple[str, str, bytes]], release: Release, problems: list[str]
) -> tuple[list[dict[str, Any]], list[DocPage]]:
    """(entries, pages): the `docs` entries and each page's HTML by id."""
    web = web_url(release.remote)
    entries: list[dict[str, Any]] = []
    pages: list[DocPage] = []
    total = 0
    for path, category, raw in files:
        slug = slug_of(path)
        doc_id = f"{category}-{slug}"
        if any(e["id"] == doc_id for e in entries):
            problems.append(f"{path}: left out, another page already has the id {doc_id}")
            continue
        fields, body = front_matter(raw.decode("utf-8", "replace"))
        html = render(body, Links(posixpath.dirname(path), web, release.commit), "doc-")
        size = len(html.encode())
        if size > MAX_HTML_BYTES:
            problems.append(f"{path}: left out, its HTML is larger than {MAX_HTML_BYTES} bytes")
            continue
        if total + size > MAX_RELEASE_HTML_BYTES:
            problems.append(
                f"{path} and later pages: left out, over {MAX_RELEASE_HTML_BYTES} bytes"
            )
            break
        total += size
        title = fields.get("page_title", "") if category in ("overview", "guides") else ""
        entries.append(
            {
                "id": doc_id,
                "title": title or slug,
                "path": path,
                "slug": slug,
                "category": category,
                "subcategory": fields.get("subcategory", ""),
                "language": "hcl",
            }
        )
        pages.append(DocPage(doc_id, html))
    return entries, pages


class ProviderDocumenter:
    def __init__(
        self,
        providers: ProviderIndex,
        store: ProviderDocsIndex,
        git: GitBackend,
        fetch: Callable[[RepoRecord], Path],
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self._providers = providers
        self._store = store
        self._git = git
        self._fetch = fetch  # the repository's mirror, fetched (modules.publisher)
        self._on_change = on_change

    def document(
        self,
        provider: ProviderRecord,
        repo: RepoRecord,
        version: ProviderVersionRecord,
        tag: str,
        fetched: dict[int, Path] | None = None,
    ) -> bool:
        """Store the pages of `version` from `tag`; False if it could not be
        done now (logged) or the version was already documented. `fetched`
        keeps mirrors already fetched by a run over many versions (reindex)."""
        try:
            fetched = {} if fetched is None else fetched
            if repo.id not in fetched:
                fetched[repo.id] = self._fetch(repo)
            return self._document(fetched[repo.id], repo, version, self._tags(version, tag))
        except (GitError, GitregError, OSError, KeyError, ValueError) as exc:
            log.warning("no documentation for provider %s %s: %s", provider.address, tag, exc)
            return False

    def _tags(self, version: ProviderVersionRecord, tag: str) -> list[str]:
        # A forge release names its tag; an upload or `provider publish` does
        # not, and then the usual spellings of the version's tag are tried.
        return [tag] if tag else [f"v{version.version}", version.version]

    def _document(
        self, mirror: Path, repo: RepoRecord, version: ProviderVersionRecord, tags: list[str]
    ) -> bool:
        refs, _ = self._git.tags(mirror)
        ref = next((r for name in tags for r in refs if r.name == name), None)
        if ref is None:
            raise ValueError(f"no tag {' or '.join(tags)} in {repo.url}")
        with self._git.objects(mirror) as store:
            files, problems = read_provider_docs(store, ref.tree_sha)
        entries, pages = build_pages(files, Release(repo.url, ref.commit_sha), problems)
        listing = {
            "format": PROVIDER_DOCS_FORMAT,
            "tag": ref.name,
            "commit": ref.commit_sha,
            "docs": entries,
            "problems": problems,
        }
        stored = self._store.put_provider_docs(
            version.id, PROVIDER_DOCS_FORMAT, json.dumps(listing, sort_keys=True), pages
        )
        if stored:
            self._on_change()
        return stored


def tag_of(source: str) -> str:
    """The tag in a forge-published version's source (`forge:owner/repo@TAG`)."""
    head, at, tag = source.rpartition("@")
    return tag if at and ":" in head else ""

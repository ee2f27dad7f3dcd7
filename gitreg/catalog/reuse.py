"""Documents by content: a version whose documentation files are those of an
earlier one gets that document with only its commit and page put in, so extraction
stays within its share of publish time (docs/performance.md, "Extraction at
publish").

Consecutive tags mostly change a few files, and usually none that documentation
reads: a `.tf`, README or CHANGELOG. `extract` is a function of those files
(their paths and bytes, so their git blob shas), the remote, the module's
directory, the CHANGELOG section of the version, the commit and the version's
page. The last two only appear as themselves: the `commit` field and the links
resolved against them. So a document is made once per distinct content, as
JSON with unguessable stand-ins for them, and each version puts in its own
(bench/catalog.py; docs/performance.md "Extraction at publish").
"""

from __future__ import annotations

import json
import secrets

from gitreg.archives.build import ObjectSource
from gitreg.catalog.extract import Origin, changelog_text, extract, is_changelog
from gitreg.catalog.lru import SizedLru
from gitreg.catalog.tree import doc_listing, read_doc_files, read_listed

# Per Documenter. Reuse is mostly between the versions of one module in one sync,
# so a few documents would do; 8 MiB keeps those of a few dozen modules.
CACHE_BYTES = 8 * 1024 * 1024

# Random per process, so no README or .tf can contain them by design or by chance.
_COMMIT = secrets.token_hex(20)
_PAGE = "/" + secrets.token_hex(16)

Key = tuple[str, str, tuple[tuple[str, bytes], ...], str]


class Documents:
    """JSON documents by what they are made of, least recently used out first."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        # A document over an eighth of the bound is made again each time, not kept.
        self._texts: SizedLru[Key, str] = SizedLru(max_bytes, largest_share=8)

    def document(self, store: ObjectSource, tree_sha: str, origin: Origin) -> str:
        """The JSON document of the tree at `origin` (json.dumps with sort_keys),
        exactly what `extract` makes of `read_doc_files`."""
        listing = doc_listing(store, tree_sha)
        if listing is None:  # more files than are read: not worth keeping
            files, notes = read_doc_files(store, tree_sha)
            return json.dumps(extract(files, origin, notes), sort_keys=True)
        # Only the CHANGELOG section depends on the version; read it every time.
        changelogs, _ = read_listed(store, [e for e in listing if is_changelog(e[0])])
        key = (origin.remote, origin.subdir, listing, changelog_text(changelogs, origin.version))
        commit, page = json.dumps(origin.commit)[1:-1], json.dumps(origin.page)[1:-1]
        text = self._texts.get(key)
        if text is not None:
            return text.replace(_COMMIT, commit).replace(_PAGE, page)
        # The files already listed (no second walk of the tree): with at most
        # MAX_DOC_FILES of them, the same files and notes `read_doc_files` gives.
        files, notes = read_listed(store, listing)
        page_stand_in = _PAGE if origin.page else ""
        stand_in = Origin(origin.remote, _COMMIT, origin.subdir, origin.version, page_stand_in)
        text = json.dumps(extract(files, stand_in, notes), sort_keys=True)
        self._texts.put(key, text)
        return text.replace(_COMMIT, commit).replace(_PAGE, page)

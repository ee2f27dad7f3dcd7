"""Reading a provider's documentation files from the release's source tree.

The Terraform registry's convention (the docs in the release's docs/
folder): `docs/index.md`, `docs/resources/*.md`,
`docs/data-sources/*.md`, `docs/guides/*.md`, `docs/functions/*.md` and
`docs/ephemeral-resources/*.md`; providers that predate it keep
`website/docs/index.html.markdown`, `website/docs/r/*`, `website/docs/d/*`,
`website/docs/guides/*` and `website/docs/functions/*`. As on the public
registry, the legacy layout is read only when `docs/` has none.

A release is untrusted input: a file over `MAX_DOC_BYTES` and every file
after the first `MAX_DOCS` are left out, each with a note the version's
problems show, so one hostile tag cannot fill the disk.
"""

from __future__ import annotations

from dulwich.objects import Blob, ObjectID, Tree

from gitreg.archives.build import ObjectSource
from gitreg.catalog.tree import subtree

MAX_DOC_BYTES = 512 * 1024
MAX_DOCS = 1000
_FMT = 0o170000
_FILE = 0o100000

# (directory in the tree, category, file suffixes); "" reads only the index.
CURRENT = (
    ("docs", "overview", (".md", ".markdown")),
    ("docs/resources", "resources", (".md", ".markdown")),
    ("docs/data-sources", "data-sources", (".md", ".markdown")),
    ("docs/ephemeral-resources", "ephemeral-resources", (".md", ".markdown")),
    ("docs/guides", "guides", (".md", ".markdown")),
    ("docs/functions", "functions", (".md", ".markdown")),
)
_LEGACY_SUFFIXES = (".html.markdown", ".html.md", ".markdown", ".md")
LEGACY = (
    ("website/docs", "overview", _LEGACY_SUFFIXES),
    ("website/docs/r", "resources", _LEGACY_SUFFIXES),
    ("website/docs/d", "data-sources", _LEGACY_SUFFIXES),
    ("website/docs/ephemeral-resources", "ephemeral-resources", _LEGACY_SUFFIXES),
    ("website/docs/guides", "guides", _LEGACY_SUFFIXES),
    ("website/docs/functions", "functions", _LEGACY_SUFFIXES),
)


def read_provider_docs(
    store: ObjectSource, tree_sha: str
) -> tuple[list[tuple[str, str, bytes]], list[str]]:
    """[(path, category, bytes)] of the documentation files, and notes about
    files left out; the overview is only the directory's `index` file."""
    root = store[ObjectID(tree_sha.encode())]
    if not isinstance(root, Tree):
        return [], [f"{tree_sha} is not a tree"]
    for layout in (CURRENT, LEGACY):
        found: list[tuple[str, str, bytes]] = []
        notes: list[str] = []
        for directory, category, suffixes in layout:
            tree = _walk(store, root, directory)
            if tree is not None:
                _read(store, tree, directory, category, suffixes, found, notes)
        if found or notes:
            return found, notes
    return [], []


def _walk(store: ObjectSource, tree: Tree, path: str) -> Tree | None:
    for part in path.split("/"):
        found = subtree(store, tree, part)
        if found is None:
            return None
        tree = found
    return tree


def _read(
    store: ObjectSource,
    tree: Tree,
    directory: str,
    category: str,
    suffixes: tuple[str, ...],
    found: list[tuple[str, str, bytes]],
    notes: list[str],
) -> None:
    for entry in sorted(tree.iteritems()):
        if len(notes) >= 100:
            return  # the notes are bounded too
        name = entry.path.decode("utf-8", "replace")
        if entry.mode & _FMT != _FILE or not name.lower().endswith(suffixes):
            continue
        if category == "overview" and not name.lower().startswith("index."):
            continue
        path = f"{directory}/{name}"
        if len(found) >= MAX_DOCS:
            # One note, not one per file: a hostile tree may hold millions.
            if not any(n.startswith("more than") for n in notes):
                notes.append(f"more than {MAX_DOCS} pages: {path} and later ones left out")
            return
        blob = store[entry.sha]
        if not isinstance(blob, Blob):
            continue
        if blob.raw_length() > MAX_DOC_BYTES:
            notes.append(f"{path}: left out, larger than {MAX_DOC_BYTES} bytes")
            continue
        found.append((path, category, blob.as_raw_string()))

"""Reading the files documentation is made from, straight from git objects.

Only what the documentation shows is read: the `.tf` files, README and CHANGELOG
of the module's directory, and the `.tf` files and README of each directory
under `modules/` and `examples/`. Nothing else of the tree is loaded, so
extraction costs a few blob reads on top of the archive's walk.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from dulwich.errors import ChecksumMismatch, ObjectFormatException
from dulwich.objects import Blob, ObjectID, Tree, object_header, parse_tree

from gitreg.archives.build import ObjectSource
from gitreg.catalog.lru import SizedLru

MAX_DOC_FILE_BYTES = 1024 * 1024  # a larger .tf or README is reported, not read
MAX_DOC_FILES = 2000  # bounds the work one hostile tag can cause
_DIR = 0o040000
_FMT = 0o170000
NESTED = ("modules", "examples")
CACHE_BYTES = 16 * 1024 * 1024  # per process; most files are unchanged from tag to tag


class BlobTexts(SizedLru[bytes, bytes]):
    """The bytes of documentation blobs by their sha. A blob's bytes never
    change for its sha, so the cache is right for every repository; it spares
    re-reading (and inflating) the same .tf and README files for each version
    of a module, so extraction stays within its share of publish time. A blob
    over a sixteenth of the bound is read again each time, not kept."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        super().__init__(max_bytes, largest_share=16)


_TEXTS = BlobTexts()


def _wanted(name: str, top: bool) -> bool:
    lower = name.lower()
    if lower.endswith(".tf"):
        return True
    if lower in ("readme.md", "readme", "readme.markdown"):
        return True
    return top and lower in ("changelog.md", "changelog", "changes.md")


def read_doc_files(store: ObjectSource, tree_sha: str) -> tuple[dict[str, bytes], list[str]]:
    """{path: bytes} of the documentation files under a tree, and notes
    about files left out (too large, too many: past MAX_DOC_FILES, each
    directory is noted once)."""
    considered = _considered(store, tree_sha)
    if considered is None:
        return {}, [f"{tree_sha} is not a tree"]
    files: dict[str, bytes] = {}
    notes: list[str] = []
    noted = None
    for path, sha in considered:
        if len(files) >= MAX_DOC_FILES:
            directory = path.rpartition("/")[0]
            if directory != noted:
                notes.append(f"{path}: more than {MAX_DOC_FILES} documentation files")
                noted = directory
            continue
        text = _read_blob(store, sha, path, notes)
        if text is not None:
            files[path] = text
    return files, notes


def doc_listing(store: ObjectSource, tree_sha: str) -> tuple[tuple[str, bytes], ...] | None:
    """(path, blob sha) of every file `read_doc_files` would consider, in its
    order, without reading a blob: what a document is made of
    (gitreg/catalog/reuse.py). None when there are more than MAX_DOC_FILES
    (which of them are read is then up to `read_doc_files`) or no tree."""
    found = _considered(store, tree_sha)
    return tuple(found) if found is not None and len(found) <= MAX_DOC_FILES else None


def _considered(store: ObjectSource, tree_sha: str) -> list[tuple[str, bytes]] | None:
    """(path, blob sha) of the files documentation reads, in order; None for no tree."""
    root = _entries(store, tree_sha.encode())
    if root is None:
        return None
    found = _listed(root, "", True)
    for nested in NESTED:
        parent = _entries(store, _dir_sha(root, nested))
        for name, mode, sha in parent or ():
            child = _entries(store, sha) if mode & _FMT == _DIR else None
            if child is not None:
                found += _listed(child, f"{nested}/{name}/", False)
    return found


def read_listed(
    store: ObjectSource, listing: Sequence[tuple[str, bytes]]
) -> tuple[dict[str, bytes], list[str]]:
    """The bytes of listed files as `read_doc_files` reads them (too large ones
    left out, with a note), for fewer than MAX_DOC_FILES of them."""
    files: dict[str, bytes] = {}
    notes: list[str] = []
    for path, sha in listing:
        text = _read_blob(store, sha, path, notes)
        if text is not None:
            files[path] = text
    return files, notes


Entries = tuple[tuple[str, int, bytes], ...]


class _Trees(SizedLru[bytes, "Entries"]):
    """Sorted entries of trees by sha: a version's root tree is new, but
    `modules/` and `examples/` rarely change. Bounded in entries (about 150
    bytes each: 64k is under 10 MiB); a huge directory is read again, not kept."""

    def __init__(self, max_entries: int = 65536) -> None:
        super().__init__(max_entries, largest_share=64)


_TREES = _Trees()


def _entries(store: ObjectSource, sha: bytes | None) -> Entries | None:
    if sha is None:
        return None
    known = _TREES.get(sha)
    if known is not None:
        return known
    get_raw: Callable[[bytes], tuple[int, bytes]] | None = getattr(store, "get_raw", None)
    if get_raw is not None and len(sha) == 40:
        parsed = _raw_tree(get_raw, sha)
    else:  # an object source with objects only, or not SHA-1
        tree = store[ObjectID(sha)]
        items = tree.iteritems() if isinstance(tree, Tree) else None
        parsed = None if items is None else {e.path: (e.mode, e.sha) for e in items}
    if parsed is None:
        return None
    entries = tuple(
        (name.decode("utf-8", "replace"), mode, child)
        for name, (mode, child) in sorted(parsed.items())
    )
    _TREES.put(sha, entries)
    return entries


def _raw_tree(
    get_raw: Callable[[bytes], tuple[int, bytes]], sha: bytes
) -> dict[bytes, tuple[int, bytes]] | None:
    """A tree's {name: (mode, sha)} as dulwich's `Tree` holds them, from its raw
    text: `store[sha]` also builds a `Tree` object and sorts its entries as
    named tuples, a quarter of the walk's CPU for the root trees every version
    reads (docs/performance.md, "Extraction at publish"). Checked against its
    sha as `store[sha]` checks it."""
    kind, text = get_raw(sha)
    if kind != Tree.type_num:
        return None
    # Git names objects by SHA-1: this finds a corrupt object, as dulwich does.
    hashed = hashlib.sha1(object_header(Tree.type_num, len(text)), usedforsecurity=False)
    hashed.update(text)
    got = hashed.hexdigest().encode()
    if got != sha:
        raise ChecksumMismatch(sha, got)
    try:
        return {name: (mode, child) for name, mode, child in parse_tree(text, 20)}
    except ValueError as exc:  # as `Tree` reports a malformed tree
        raise ObjectFormatException(exc) from exc


def _dir_sha(entries: Entries, name: str) -> bytes | None:
    for entry_name, mode, sha in entries:
        if entry_name == name:
            return sha if mode & _FMT == _DIR else None
    return None


def _listed(entries: Entries, prefix: str, top: bool) -> list[tuple[str, bytes]]:
    return [
        (prefix + name, sha)
        for name, mode, sha in entries
        if mode & _FMT == 0o100000 and _wanted(name, top)
    ]


def subtree(store: ObjectSource, tree: Tree, name: str) -> Tree | None:
    """The directory `name` of a tree; None when there is none (or it is a file)."""
    key = name.encode()
    if key not in tree:
        return None
    mode, sha = tree[key]
    if mode & _FMT != _DIR:
        return None
    found = store[sha]
    return found if isinstance(found, Tree) else None


def _read_blob(store: ObjectSource, sha: bytes, path: str, notes: list[str]) -> bytes | None:
    known = _TEXTS.get(sha)
    if known is not None:
        return known
    blob = store[ObjectID(sha)]
    if not isinstance(blob, Blob):
        return None
    if blob.raw_length() > MAX_DOC_FILE_BYTES:
        notes.append(f"{path}: larger than {MAX_DOC_FILE_BYTES} bytes, not read")
        return None
    text = blob.as_raw_string()
    _TEXTS.put(sha, text)
    return text

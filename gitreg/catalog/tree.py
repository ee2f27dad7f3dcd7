"""Reading the files documentation is made from, straight from git objects.

Only what issue 13 describes is read: the `.tf` files, README and CHANGELOG
of the module's directory, and the `.tf` files and README of each directory
under `modules/` and `examples/`. Nothing else of the tree is loaded, so
extraction costs a few blob reads on top of the archive's walk.
"""

from __future__ import annotations

from dulwich.objects import Blob, ObjectID, Tree

from gitreg.archive import ObjectSource

MAX_DOC_FILE_BYTES = 1024 * 1024  # a larger .tf or README is reported, not read
MAX_DOC_FILES = 2000  # bounds the work one hostile tag can cause
_DIR = 0o040000
_FMT = 0o170000
NESTED = ("modules", "examples")


def _wanted(name: str, top: bool) -> bool:
    lower = name.lower()
    if lower.endswith(".tf"):
        return True
    if lower in ("readme.md", "readme", "readme.markdown"):
        return True
    return top and lower in ("changelog.md", "changelog", "changes.md")


def read_doc_files(store: ObjectSource, tree_sha: str) -> tuple[dict[str, bytes], list[str]]:
    """{path: bytes} of the documentation files under a tree, and notes
    about files left out (too large, too many)."""
    files: dict[str, bytes] = {}
    notes: list[str] = []
    root = store[ObjectID(tree_sha.encode())]
    if not isinstance(root, Tree):
        return files, [f"{tree_sha} is not a tree"]
    _read_dir(store, root, "", True, files, notes)
    for nested in NESTED:
        parent = _subtree(store, root, nested)
        if parent is None:
            continue
        for entry in sorted(parent.iteritems()):
            child = _subtree(store, parent, entry.path.decode("utf-8", "replace"))
            if child is not None:
                prefix = f"{nested}/{entry.path.decode('utf-8', 'replace')}/"
                _read_dir(store, child, prefix, False, files, notes)
    return files, notes


def _subtree(store: ObjectSource, tree: Tree, name: str) -> Tree | None:
    key = name.encode()
    if key not in tree:
        return None
    mode, sha = tree[key]
    if mode & _FMT != _DIR:
        return None
    found = store[sha]
    return found if isinstance(found, Tree) else None


def _read_dir(
    store: ObjectSource,
    tree: Tree,
    prefix: str,
    top: bool,
    files: dict[str, bytes],
    notes: list[str],
) -> None:
    for entry in sorted(tree.iteritems()):
        name = entry.path.decode("utf-8", "replace")
        if entry.mode & _FMT != 0o100000 or not _wanted(name, top):
            continue
        if len(files) >= MAX_DOC_FILES:
            notes.append(f"{prefix}{name}: more than {MAX_DOC_FILES} documentation files")
            return
        blob = store[entry.sha]
        if not isinstance(blob, Blob):
            continue
        if blob.raw_length() > MAX_DOC_FILE_BYTES:
            notes.append(f"{prefix}{name}: larger than {MAX_DOC_FILE_BYTES} bytes, not read")
            continue
        files[prefix + name] = blob.as_raw_string()

"""Reading directories out of many tags' trees at once (monorepos).

A sync of a monorepo with 50 modules and 100 tags asks thousands of questions of the
form "what is `modules/vpc` at this tag?". Each is a few tree reads, so they are
answered here on one open object store, with recent trees kept (each module of a
tag reads that tag's root tree) and directories unchanged between tags (same sha at
the same path) matched once, not once per tag.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Protocol

from dulwich.objects import ObjectID, ShaFile, Tree

from gitreg.archives.build import unsafe_name_reason

_S_IFMT = 0o170000
_S_IFDIR = 0o040000
_CACHED_TREES = 1024


class _Objects(Protocol):
    def __getitem__(self, sha: ObjectID, /) -> ShaFile: ...


class TreeReader:
    """Trees of one object store; the last `_CACHED_TREES` read are kept."""

    def __init__(self, store: _Objects) -> None:
        self._store = store
        self._trees: dict[bytes, Tree | None] = {}

    def tree(self, sha: bytes) -> Tree | None:
        if sha in self._trees:
            return self._trees[sha]
        obj = self._store[ObjectID(sha)]
        found = obj if isinstance(obj, Tree) else None
        if len(self._trees) >= _CACHED_TREES:
            # Only recent trees are read again (a tag's root for each of its modules);
            # keeping every tree of 5,000 tags would hold hundreds of MiB.
            self._trees.clear()
        self._trees[sha] = found
        return found

    def subtree(self, tree_sha: str, subdir: str) -> str | None:
        """The sha of directory `subdir` in a tree, or None if it is not one there."""
        sha = tree_sha.encode()
        for part in subdir.split("/") if subdir else []:
            tree = self.tree(sha)
            if tree is None or part.encode() not in tree:
                return None
            mode, sha = tree[part.encode()]
            if mode & _S_IFMT != _S_IFDIR:
                return None
        return sha.decode() if self.tree(sha) is not None else None

    def matching_dirs(self, tree_shas: Iterable[str], pattern: str) -> dict[str, str]:
        """Directories matching `pattern` (`*` and `?` within one path component, as a
        shell glob) in any of the trees that hold a `.tf` file of their own, each
        mapped to why it is not a module, or "" when it is one."""
        found: dict[str, str] = {}
        parts = pattern.split("/")
        seen: set[tuple[bytes, str]] = set()
        for tree_sha in dict.fromkeys(tree_shas):
            self._match(tree_sha.encode(), "", parts, found, seen)
        return found

    def _match(
        self,
        sha: bytes,
        path: str,
        parts: list[str],
        found: dict[str, str],
        seen: set[tuple[bytes, str]],
    ) -> None:
        # The same directory at the same path (unchanged between tags) adds nothing new.
        if (sha, path) in seen:
            return
        seen.add((sha, path))
        tree = self.tree(sha)
        if tree is None:
            return
        if not parts:
            if found.get(path) != "":
                found[path] = "" if _has_tf(tree) else "no .tf file in the directory"
            return
        head, rest = parts[0], parts[1:]
        for entry in tree.iteritems():
            # A name the archive would refuse (`x/../..`, which `*` matches, a
            # control character, a `.git` disguise) never becomes a module path.
            if entry.mode & _S_IFMT != _S_IFDIR or unsafe_name_reason(entry.path):
                continue
            try:
                name = entry.path.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if name.startswith(".") and not head.startswith("."):
                continue  # as a shell glob: `*` does not match hidden directories
            if fnmatch.fnmatchcase(name, head):
                self._match(entry.sha, f"{path}/{name}" if path else name, rest, found, seen)


def _has_tf(tree: Tree) -> bool:
    return any(e.path.endswith(b".tf") and e.mode & _S_IFMT != _S_IFDIR for e in tree.iteritems())

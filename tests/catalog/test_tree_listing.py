"""Trees read from their raw text (gitreg/catalog/tree.py `_raw_tree`): the same
listing as through dulwich's `Tree` objects, and a corrupt tree found as
`store[sha]` finds it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dulwich.errors import ChecksumMismatch
from dulwich.object_store import BaseObjectStore
from dulwich.objects import Commit, ObjectID, ShaFile, Tree
from dulwich.repo import Repo

from gitreg.catalog import tree
from gitreg.catalog.tree import doc_listing, read_doc_files
from tests.support.gitrepo import GitRepo


class ObjectsOnly:
    """An object source without `get_raw`: read through `Tree` objects."""

    def __init__(self, store: BaseObjectStore) -> None:
        self._store = store

    def __getitem__(self, sha: ObjectID, /) -> ShaFile:
        return self._store[sha]


class Corrupt(ObjectsOnly):
    """Raw texts one byte off from what their sha names."""

    def get_raw(self, sha: bytes) -> tuple[int, bytes]:
        kind, text = self._store.get_raw(ObjectID(sha))
        return kind, text.replace(b"a.tf", b"a.tg")


@pytest.fixture
def module(tmp_path: Path) -> Iterator[tuple[Repo, str]]:
    repo = GitRepo(tmp_path / "module")
    # Names whose order differs between git's (a directory sorts as "a/") and
    # Python's, non-ASCII names, and files documentation does not read.
    for path in (
        "a.tf",
        "a/x.tf",
        "a-b.tf",
        "README.md",
        "CHANGELOG.md",
        "notes.txt",
        "modules/b/main.tf",
        "modules/a-b/main.tf",
        "modules/a.b/README.md",
        "modules/a/main.tf",
        "examples/é/main.tf",
        "examples/z/README",
    ):
        repo.write(path, f"# {path}\n")
    repo.commit("one")
    with Repo(str(repo.path)) as git:
        commit = git[git.head()]
        assert isinstance(commit, Commit)
        yield git, commit.tree.decode()


def _fresh() -> None:
    tree._TREES.clear()


def test_raw_trees_list_what_tree_objects_list(module: tuple[Repo, str]) -> None:
    git, root = module
    _fresh()
    raw = doc_listing(git.object_store, root)
    _fresh()
    objects = doc_listing(ObjectsOnly(git.object_store), root)
    assert raw is not None and raw == objects
    assert [path for path, _ in raw] == [
        "CHANGELOG.md",
        "README.md",
        "a-b.tf",
        "a.tf",
        "modules/a/main.tf",
        "modules/a-b/main.tf",
        "modules/a.b/README.md",
        "modules/b/main.tf",
        "examples/z/README",
        "examples/é/main.tf",
    ]


def test_a_corrupt_tree_is_refused_as_dulwich_refuses_it(module: tuple[Repo, str]) -> None:
    git, root = module
    _fresh()
    with pytest.raises(ChecksumMismatch):
        doc_listing(Corrupt(git.object_store), root)


def test_a_blob_where_a_tree_is_expected_lists_nothing(module: tuple[Repo, str]) -> None:
    git, root = module
    _fresh()
    found = git.object_store[ObjectID(root.encode())]
    assert isinstance(found, Tree)
    blob = found[b"a.tf"][1]
    assert doc_listing(git.object_store, blob.decode()) is None


def test_past_the_file_cap_each_directory_is_noted_once_and_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(tmp_path / "many")
    for path in ("a.tf", "b.tf", "modules/x/1.tf", "modules/x/2.tf", "modules/y/1.tf"):
        repo.write(path, f"# {path}\n")
    repo.write("c.txt", "not read\n")
    repo.commit("one")
    monkeypatch.setattr(tree, "MAX_DOC_FILES", 3)
    _fresh()
    with Repo(str(repo.path)) as git:
        commit = git[git.head()]
        assert isinstance(commit, Commit)
        root = commit.tree.decode()
        assert doc_listing(git.object_store, root) is None
        files, notes = read_doc_files(git.object_store, root)
        blob = git.object_store[ObjectID(root.encode())]
        assert isinstance(blob, Tree)
        not_a_tree = read_doc_files(git.object_store, blob[b"a.tf"][1].decode())
    assert list(files) == ["a.tf", "b.tf", "modules/x/1.tf"]
    assert notes == [
        "modules/x/2.tf: more than 3 documentation files",
        "modules/y/1.tf: more than 3 documentation files",
    ]
    assert not_a_tree == ({}, [f"{blob[b'a.tf'][1].decode()} is not a tree"])

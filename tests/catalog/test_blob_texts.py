"""The documentation blob cache (gitreg/catalog/tree.py): bounded in bytes,
least recently used out first, and never holding a blob too large to share."""

from __future__ import annotations

from pathlib import Path

from dulwich.objects import Commit, Tree
from dulwich.repo import Repo

from gitreg.catalog import tree
from gitreg.catalog.tree import BlobTexts, read_doc_files
from tests.support.gitrepo import GitRepo


def test_the_cache_stays_within_its_bytes_and_drops_the_least_recently_used() -> None:
    cache = BlobTexts(max_bytes=1_600)
    for n in range(16):
        cache.put(f"{n:040x}".encode(), bytes([n]) * 100)
    assert cache.get(f"{0:040x}".encode()) == b"\x00" * 100  # now the most recent
    cache.put(b"f" * 40, b"x" * 100)  # over the bound: the least recently used goes
    assert cache.get(f"{1:040x}".encode()) is None
    assert cache.get(f"{0:040x}".encode()) is not None
    cache.put(b"e" * 40, b"y" * 101)  # more than a sixteenth of the bound: not kept
    assert cache.get(b"e" * 40) is None


def test_read_doc_files_keeps_what_it_read_for_the_next_version(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "module")
    repo.write("main.tf", 'variable "x" {}\n')
    repo.write("README.md", "# Module\n")
    repo.commit("one")
    tree._TEXTS.clear()
    with Repo(str(repo.path)) as git:
        commit = git[git.head()]
        assert isinstance(commit, Commit)
        root = git.object_store[commit.tree]
        assert isinstance(root, Tree)
        files, notes = read_doc_files(git.object_store, commit.tree.decode())
        assert files == {"main.tf": b'variable "x" {}\n', "README.md": b"# Module\n"}
        assert notes == []
        sha = root[b"main.tf"][1]
        assert tree._TEXTS.get(sha) == b'variable "x" {}\n'


def test_the_tree_cache_stays_within_its_entries() -> None:
    trees = tree._Trees(max_entries=640)
    entries = tuple((f"f{n}.tf", 0o100644, b"0" * 20) for n in range(10))
    for n in range(64):
        trees.put(f"{n:040x}".encode(), entries)
    assert trees.get(f"{0:040x}".encode()) == entries  # 64 x 10 entries fit; now the newest
    trees.put(b"f" * 40, entries)  # one tree more: the least recently used goes
    assert trees.get(f"{1:040x}".encode()) is None and trees.get(b"f" * 40) == entries
    assert trees.get(f"{0:040x}".encode()) == entries
    trees.put(b"e" * 40, entries + entries)  # more than a 64th of the bound: not kept
    assert trees.get(b"e" * 40) is None

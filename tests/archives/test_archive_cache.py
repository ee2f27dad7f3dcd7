"""gitreg/archives/cache.py: a build that takes directories and files from the previous
build's cache writes exactly the bytes and report of a build without it."""

from __future__ import annotations

import copy
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dulwich.objects import Blob, ObjectID, Tree
from dulwich.repo import BaseRepo, MemoryRepo, Repo
from hypothesis import given, settings
from hypothesis import strategies as st

from gitreg.archives.build import ArchiveLimits, ArchiveReport, build_archive
from gitreg.archives.cache import SubtreeCache
from gitreg.archives.format import CLASSIC, fast_builder
from gitreg.errors import ArchiveTooLarge

SYMLINK = 0o120000
EXEC = 0o100755

DEFAULT_LIMITS = ArchiveLimits()

# Directories the tests change between "tags"; every name is a byte string.
Spec = dict[bytes, Any]


def _base() -> Spec:
    long = "é" * 60  # over 100 bytes in UTF-8: tarfile writes a PAX header for it
    return {
        b"main.tf": b"resource x {}\n",
        b"README.md": b"# module\n" * 40,
        b"run.sh": (EXEC, b"#!/bin/sh\n"),
        b"link": (SYMLINK, b"modules/a/main.tf"),
        b"escape": (SYMLINK, b"../../etc/passwd"),  # left out and reported
        b".git": {b"config": b"x"},  # left out and reported
        b"modules": {
            b"a": {b"main.tf": b"a" * 3000, b"vars.tf": b"variable a {}\n"},
            b"b": {b"main.tf": b"b" * 700, long.encode(): b"long name\n"},
            b"c": {b"deep": {b"er": {b"main.tf": b"c\n"}}},
        },
    }


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Repo]:
    r = Repo.init_bare(str(tmp_path / "m.git"), mkdir=True)
    yield r
    r.close()


def _store(repo: BaseRepo, spec: Spec) -> bytes:
    tree = Tree()
    for name, value in spec.items():
        if isinstance(value, dict):
            tree.add(name, 0o040000, ObjectID(_store(repo, value)))
            continue
        mode, content = value if isinstance(value, tuple) else (0o100644, value)
        blob = Blob.from_string(content)
        repo.object_store.add_object(blob)
        tree.add(name, mode, blob.id)
    repo.object_store.add_object(tree)
    return bytes(tree.id)


def _build(
    repo: BaseRepo,
    tree: bytes,
    mtime: int,
    cache: SubtreeCache | None,
    limits: ArchiveLimits = DEFAULT_LIMITS,
    prefix: str = "",
) -> tuple[bytes, ArchiveReport]:
    out = io.BytesIO()
    report = build_archive(
        repo.object_store,
        tree,
        out,
        mtime=mtime,
        limits=limits,
        builder=fast_builder(),
        prefix=prefix,
        cache=cache,
    )
    return out.getvalue(), report


def _same_as_cold(repo: Repo, trees: list[bytes], cache: SubtreeCache, **kw: Any) -> None:
    for n, tree in enumerate(trees):
        mtime = 1_700_000_000 + 3600 * n  # every tag its own commit time
        warm, warm_report = _build(repo, tree, mtime, cache, **kw)
        cold, cold_report = _build(repo, tree, mtime, None, **kw)
        assert warm == cold, f"build {n} differs with the cache"
        assert warm_report == cold_report


def test_unchanged_tree_at_another_mtime_is_written_from_the_cache(repo: Repo) -> None:
    tree = _store(repo, _base())
    cache = SubtreeCache()
    _same_as_cold(repo, [tree, tree, tree], cache)
    assert cache.hits >= 2  # the whole root, from the second build on


def test_a_changed_subtree_between_tags_gives_the_cold_bytes(repo: Repo) -> None:
    specs = [_base()]
    for change in range(5):
        spec = copy.deepcopy(specs[-1])
        if change == 0:  # one file deep down
            spec[b"modules"][b"c"][b"deep"][b"er"][b"main.tf"] = b"changed\n"
        elif change == 1:  # a file made executable: same blob, another mode
            spec[b"modules"][b"a"][b"vars.tf"] = (EXEC, b"variable a {}\n")
        elif change == 2:  # a directory removed, another added
            del spec[b"modules"][b"b"]
            spec[b"modules"][b"d"] = {b"main.tf": b"d\n", b"..": b"refused"}
        elif change == 3:  # a file at the root, so every directory's siblings stay
            spec[b"main.tf"] = b"resource y {}\n"
        else:  # a directory back as it was two tags ago
            spec[b"modules"][b"b"] = copy.deepcopy(specs[0][b"modules"][b"b"])
        specs.append(spec)
    cache = SubtreeCache()
    _same_as_cold(repo, [_store(repo, s) for s in specs], cache)
    assert cache.hits > 0


def test_directory_archives_under_a_prefix(repo: Repo) -> None:
    base = _base()
    first = _store(repo, base[b"modules"])
    base[b"modules"][b"a"][b"main.tf"] = b"new\n"
    second = _store(repo, base[b"modules"])
    _same_as_cold(repo, [first, second], SubtreeCache(), prefix="modules")


def test_a_cached_directory_over_a_limit_fails_as_without_the_cache(repo: Repo) -> None:
    limits = ArchiveLimits(max_files=5)
    cache = SubtreeCache()
    first = _store(repo, _base())  # fails at its 6th file; modules/a is kept by then
    with pytest.raises(ArchiveTooLarge, match=r"modules/b/main\.tf"):
        _build(repo, first, 1, cache, limits=limits)
    spec = _base()
    spec[b"AAA.tf"] = b"one more file before modules/a\n"
    second = _store(repo, spec)
    with pytest.raises(ArchiveTooLarge) as cold:
        _build(repo, second, 2, None, limits=limits)
    with pytest.raises(ArchiveTooLarge) as warm:
        _build(repo, second, 2, cache, limits=limits)
    # modules/a would cross max_files: it is walked, so the error names the same path.
    assert "modules/a/vars.tf" in str(cold.value)
    assert str(warm.value) == str(cold.value)


def test_directories_unchanged_for_several_tags_stay_cached(repo: Repo) -> None:
    specs = [_base(), _base(), _base()]
    specs[1][b"main.tf"] = b"root changed: modules/ comes from the cache whole\n"
    specs[2][b"modules"][b"a"][b"main.tf"] = b"modules/a changed\n"
    cache = SubtreeCache()
    # The second tree twice: the third build takes the whole root from the cache.
    _same_as_cold(repo, [_store(repo, s) for s in [specs[0], specs[1], specs[1]]], cache)
    misses = cache.misses
    _same_as_cold(repo, [_store(repo, specs[2])], cache)
    # Walked again: the root, modules/ and modules/a; modules/b and modules/c are
    # cached although the builds before took them inside modules/ or the root
    # without a look.
    assert cache.misses - misses == 3


def test_over_its_bound_a_build_keeps_nothing(repo: Repo) -> None:
    tree = _store(repo, _base())
    cache = SubtreeCache(max_bytes=1000)  # less than the tree's content
    _same_as_cold(repo, [tree, tree], cache)
    assert cache.hits == 0


def test_the_classic_builder_from_the_cache(repo: Repo) -> None:
    tree = _store(repo, _base())
    cache = SubtreeCache()
    out = []
    for _ in range(2):
        buf = io.BytesIO()
        build_archive(repo.object_store, tree, buf, mtime=5, builder=CLASSIC, cache=cache)
        out.append(buf.getvalue())
    cold = io.BytesIO()
    build_archive(repo.object_store, tree, cold, mtime=5, builder=CLASSIC)
    assert out[0] == out[1] == cold.getvalue() and cache.hits == 1


_file = st.binary(max_size=600)
_name = st.sampled_from([b"a.tf", b"b.tf", b"x", "ü.tf".encode(), b"d" * 120])
_dirs = st.recursive(
    st.dictionaries(_name, _file, max_size=4),
    lambda inner: st.dictionaries(_name, st.one_of(_file, inner), max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_dirs, min_size=1, max_size=5), st.integers(min_value=-(2**34), max_value=2**34))
def test_any_sequence_of_trees_gives_the_cold_bytes(specs: list[Spec], mtime: int) -> None:
    repo = MemoryRepo()
    cache = SubtreeCache()
    for spec in specs:
        tree = _store(repo, spec)
        assert _build(repo, tree, mtime, cache) == _build(repo, tree, mtime, None)

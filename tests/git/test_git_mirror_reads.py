"""Reading a mirror's objects: packs through their own indexes, no multi-pack-index."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from dulwich.objects import Blob, ObjectID, Tree

from gitreg.git.backend import DulwichBackend
from tests.support.gitrepo import GitRepo, git


def _mirror(tmp_path: Path, make_repo: Callable[[str], GitRepo]) -> tuple[Path, DulwichBackend]:
    repo = make_repo("work")
    for n in range(20):
        repo.write(f"f{n}.tf", f"# file {n}\n")
    repo.commit()
    repo.tag("v1.0.0")
    backend = DulwichBackend()
    mirror = tmp_path / "mirror.git"
    backend.fetch(str(repo.path), mirror)
    return mirror, backend


def _read_all(backend: DulwichBackend, mirror: Path) -> dict[bytes, bytes]:
    """Every file of v1.0.0's tree: name -> contents."""
    (tag,), problems = backend.tags(mirror)
    assert not problems
    with backend.objects(mirror) as store:
        tree = store[ObjectID(tag.tree_sha.encode())]
        assert isinstance(tree, Tree)
        files = {}
        for entry in tree.iteritems():
            blob = store[entry.sha]
            assert isinstance(blob, Blob)
            files[entry.path] = blob.data
        return files


def test_object_reads_do_not_look_for_a_multi_pack_index(
    tmp_path: Path, make_repo: Callable[[str], GitRepo], monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror, backend = _mirror(tmp_path, make_repo)
    looked: list[str] = []
    exists = os.path.exists

    def counting(path: str | os.PathLike[str]) -> bool:
        if str(path).endswith("multi-pack-index"):
            looked.append(str(path))
        return exists(path)

    monkeypatch.setattr(os.path, "exists", counting)
    files = _read_all(backend, mirror)
    assert len(files) == 20
    assert looked == []


def test_a_mirror_with_a_multi_pack_index_reads_through_its_packs(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> None:
    mirror, backend = _mirror(tmp_path, make_repo)
    git(mirror, "multi-pack-index", "write")
    assert (mirror / "objects" / "pack" / "multi-pack-index").is_file()
    files = _read_all(backend, mirror)
    assert files[b"f7.tf"] == b"# file 7\n"
    assert len(files) == 20

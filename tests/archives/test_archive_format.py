"""gitreg/archives/format.py: tar bytes exactly as tarfile writes them, and the builders."""

from __future__ import annotations

import gzip
import io
import sys
import tarfile

import pytest
from dulwich.objects import Blob, Tree
from dulwich.repo import Repo
from hypothesis import given, settings
from hypothesis import strategies as st

from gitreg.archives.build import build_archive
from gitreg.archives.format import CLASSIC, TarStream, fast_builder, gzip_writer, tar_entry

_names = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x2FF, exclude_characters="/\\"),
    min_size=1,
    max_size=140,
)
_member = st.tuples(
    _names,
    st.sampled_from([tarfile.REGTYPE, tarfile.SYMTYPE]),
    st.sampled_from([0o644, 0o755]),
    st.integers(min_value=-(2**34), max_value=2**34),  # mtimes before 1970 and past 8**11
    st.binary(max_size=1500),
    _names,
)


def _info(name: str, kind: bytes, mode: int, mtime: int, size: int, link: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = kind, mode, mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if kind == tarfile.SYMTYPE:
        info.linkname = link
    else:
        info.size = size
    return info


@settings(max_examples=300, deadline=None)
@given(st.lists(_member, max_size=6))
def test_tar_stream_writes_the_bytes_tarfile_writes(members: list[tuple]) -> None:  # type: ignore[type-arg]
    ours, theirs = io.BytesIO(), io.BytesIO()
    stream = TarStream(ours)
    with tarfile.open(fileobj=theirs, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
        for name, kind, mode, mtime, data, link in members:
            body = data if kind == tarfile.REGTYPE else b""
            stream.add(_info(name, kind, mode, mtime, len(body), link), body)
            tar.addfile(_info(name, kind, mode, mtime, len(body), link), io.BytesIO(body))
    stream.close()
    assert ours.getvalue() == theirs.getvalue()


def _tree(repo: Repo) -> bytes:
    tree = Tree()
    for n in range(30):
        blob = Blob.from_string(b"resource %d {}\n" % n * (n + 1))
        repo.object_store.add_object(blob)
        tree.add(b"f%02d.tf" % n, 0o100644, blob.id)
    repo.object_store.add_object(tree)
    return tree.id


def _archive(repo: Repo, tree_id: bytes, builder: str) -> bytes:
    out = io.BytesIO()
    build_archive(repo.object_store, tree_id, out, mtime=1_700_000_000, builder=builder)
    return out.getvalue()


def test_fast_builder_is_deterministic_and_reads_back(tmp_path) -> None:  # type: ignore[no-untyped-def]
    repo = Repo.init_bare(str(tmp_path / "r.git"), mkdir=True)
    tree_id = _tree(repo)
    builder = fast_builder()
    first, second = _archive(repo, tree_id, builder), _archive(repo, tree_id, builder)
    assert first == second
    # No timestamp, no file name in the gzip header, whatever the builder.
    assert first[4:8] == b"\0\0\0\0" and not first[3] & 0x08
    classic = _archive(repo, tree_id, CLASSIC)
    assert gzip.decompress(first) == gzip.decompress(classic)
    repo.close()


def test_fast_builder_is_isal_when_its_wheel_is_installed() -> None:
    # isal is a dependency (pyproject.toml): a test environment without it must fail
    # here, not skip, or CI would go on measuring nothing of the fast builder.
    assert fast_builder().startswith("tar-pax+isal-")


@pytest.mark.parametrize(
    ("builder", "message"),
    [("tar-pax+brotli-11", "unknown archive builder"), ("tar-pax+isal-0.0.1-1", "not this")],
)
def test_unknown_builder_is_refused(builder: str, message: str) -> None:
    with pytest.raises(ValueError, match=message), gzip_writer(io.BytesIO(), builder):
        pass


def test_without_the_isal_wheel_new_archives_use_the_classic_builder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "isal", None)  # what a missing wheel looks like
    assert fast_builder() == CLASSIC


class _Writes:
    """Records every write: the compressor's output may depend on how its input is
    cut, so a member must reach it in the same pieces however it was written."""

    def __init__(self) -> None:
        self.calls: list[bytes] = []

    def write(self, data: bytes, /) -> int:
        self.calls.append(bytes(data))
        return len(data)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(_names, st.sampled_from([0, 1, 511, 512, 3000, 100_000, 300_000])),
        max_size=12,
    ),
    st.integers(min_value=-(2**34), max_value=2**34),
)
def test_entries_reach_the_stream_in_the_pieces_add_writes(
    members: list[tuple[str, int]], mtime: int
) -> None:
    by_add, by_entry = _Writes(), _Writes()
    added, entered = TarStream(by_add), TarStream(by_entry)
    for n, (name, size) in enumerate(members):
        data = bytes([n % 251]) * size
        entry = tar_entry(name, tarfile.REGTYPE, 0o755 if n % 3 else 0o644, data)
        if n % 4 == 3:  # a symlink, its target a name too (checked by build.py)
            entry = tar_entry(name, tarfile.SYMTYPE, 0o755, link=name[::-1])
            data = b""
        added.add(entry.info(mtime), data)
        entered.entry(entry, mtime)
    added.close()
    entered.close()
    assert by_entry.calls == by_add.calls

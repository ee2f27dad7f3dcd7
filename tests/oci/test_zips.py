"""The module zip: the archive's tree, deterministic, in fixed modes and times."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile

from gitreg.oci.zips import tar_to_zip


def _archive(entries: list[tuple[str, bytes | str | None, int]], mtime: int = 12345) -> bytes:
    """A `.tar.gz` of (name, bytes for a file / str for a symlink target / None
    for a directory, mode)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, content, mode in entries:
            info = tarfile.TarInfo(name)
            info.mode, info.mtime = mode, mtime
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(content, str):
                info.type, info.linkname = tarfile.SYMTYPE, content
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return raw.getvalue()


ENTRIES: list[tuple[str, bytes | str | None, int]] = [
    ("main.tf", b'variable "x" {}\n' * 50, 0o664),
    ("modules/", None, 0o775),
    ("modules/sub/run.sh", b"#!/bin/sh\n", 0o775),
    ("README.md", b"# readme\n", 0o600),
    ("link.tf", "main.tf", 0o777),
]


def _zip(archive: bytes) -> bytes:
    out = io.BytesIO()
    tar_to_zip(io.BytesIO(archive), out)
    return out.getvalue()


def test_the_same_tree_gives_the_same_bytes_whatever_the_tar_times() -> None:
    assert _zip(_archive(ENTRIES, mtime=1)) == _zip(_archive(ENTRIES, mtime=999999))


def test_entries_keep_their_order_content_and_kind() -> None:
    zipped = zipfile.ZipFile(io.BytesIO(_zip(_archive(ENTRIES))))
    names = [i.filename for i in zipped.infolist()]
    assert names == ["main.tf", "modules/", "modules/sub/run.sh", "README.md", "link.tf"]
    assert zipped.read("main.tf") == ENTRIES[0][1]
    modes = {i.filename: i.external_attr >> 16 for i in zipped.infolist()}
    assert modes["main.tf"] == stat.S_IFREG | 0o644
    assert modes["README.md"] == stat.S_IFREG | 0o644
    assert modes["modules/sub/run.sh"] == stat.S_IFREG | 0o755
    assert modes["modules/"] == stat.S_IFDIR | 0o755
    assert modes["link.tf"] == stat.S_IFLNK | 0o777
    assert zipped.read("link.tf") == b"main.tf"


def test_fixed_times_creator_and_no_data_descriptors() -> None:
    zipped = zipfile.ZipFile(io.BytesIO(_zip(_archive(ENTRIES))))
    for info in zipped.infolist():
        assert info.date_time == (1980, 1, 1, 0, 0, 0)
        assert info.create_system == 3
        assert info.flag_bits & 0x08 == 0
        assert info.extra == b"" and info.comment == b""
    assert zipped.testzip() is None

"""Tars from outside are read with bounded headers (gitreg/archives/entries.py
`open_tar`): a pax or GNU long-name header is refused when it is larger than
any real one, before it is read, and sparse files are refused."""

from __future__ import annotations

import io
import tarfile

import pytest

from gitreg.archives.dirhash import archive_files
from gitreg.archives.entries import MAX_TAR_HEADER_BYTES, open_tar


def _tar_gz(info: tarfile.TarInfo, data: bytes = b"", form: int = tarfile.PAX_FORMAT) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=form) as tar:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        tar.addfile(_file("after.tf", b"# after\n"), io.BytesIO(b"# after\n"))
    return out.getvalue()


def _file(name: str, data: bytes = b"") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info


def _names(body: bytes) -> list[str]:
    with open_tar(mode="r:gz", fileobj=io.BytesIO(body)) as tar:
        return [member.name for member in tar]


def test_ordinary_pax_and_gnu_long_names_are_read() -> None:
    long_name = "modules/" + "deep/" * 60 + "main.tf"
    assert _names(_tar_gz(_file(long_name))) == [long_name, "after.tf"]
    gnu = _tar_gz(_file(long_name), form=tarfile.GNU_FORMAT)
    assert _names(gnu) == [long_name, "after.tf"]


def test_a_pax_header_larger_than_any_real_one_is_refused_unread() -> None:
    bomb = _file("main.tf")
    bomb.pax_headers = {"comment": "A" * (8 * 1024 * 1024)}  # 8 MiB, 8 KiB gzipped
    body = _tar_gz(bomb)
    assert len(body) < 64 * 1024
    with pytest.raises(tarfile.HeaderError, match=f"more than {MAX_TAR_HEADER_BYTES}"):
        _names(body)
    with pytest.raises(tarfile.TarError):
        archive_files(io.BytesIO(body))


def test_a_gnu_long_name_larger_than_any_real_one_is_refused_unread() -> None:
    body = _tar_gz(_file("x" * (2 * MAX_TAR_HEADER_BYTES)), form=tarfile.GNU_FORMAT)
    with pytest.raises(tarfile.HeaderError, match=f"more than {MAX_TAR_HEADER_BYTES}"):
        _names(body)


def test_a_sparse_file_is_refused() -> None:
    sparse = _file("disk.img")
    sparse.type = tarfile.GNUTYPE_SPARSE
    with pytest.raises(tarfile.HeaderError, match="sparse"):
        _names(_tar_gz(sparse, form=tarfile.GNU_FORMAT))
    pax_sparse = _file("disk.img")
    pax_sparse.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0"}
    with pytest.raises(tarfile.HeaderError, match="sparse"):
        _names(_tar_gz(pax_sparse, b"1\n0\n512\n" + bytes(509)))

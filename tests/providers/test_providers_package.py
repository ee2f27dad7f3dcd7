"""Provider zips: the layout Terraform can install, and h1:/zh: hashes under limits."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from gitreg.archives.entries import check_zip_entries
from gitreg.errors import ArchiveTooLarge, PackageError
from gitreg.providers.package import PackageInfo, PackageLimits, inspect_package
from tests.support.provider_dist import count_zip_entries_read, zip_bytes, zip_of_directories

LIMITS = PackageLimits(max_package_bytes=10_000_000, max_unpacked_bytes=10_000_000, max_files=50)
EXE = "terraform-provider-null_v2.1.2_x4"


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "terraform-provider-null_2.1.2_linux_amd64.zip"
    path.write_bytes(data)
    return path


def _inspect(
    tmp_path: Path, data: bytes, os_: str = "linux", limits: PackageLimits = LIMITS
) -> PackageInfo:
    return inspect_package(_write(tmp_path, data), "null", os_, limits)


def test_hashes_follow_terraform_definitions(tmp_path: Path) -> None:
    data = zip_bytes({EXE: b"binary", "CHANGELOG.md": b"notes\n", "docs/README": b"hi"})
    info = _inspect(tmp_path, data)
    assert info.zh == "zh:" + hashlib.sha256(data).hexdigest()
    # h1: base64 sha256 of "<sha256 hex>  <path>\n" per file, sorted by path.
    lines = "".join(
        f"{hashlib.sha256(content).hexdigest()}  {name}\n"
        for name, content in sorted(
            {EXE: b"binary", "CHANGELOG.md": b"notes\n", "docs/README": b"hi"}.items()
        )
    )
    expected = base64.b64encode(hashlib.sha256(lines.encode()).digest()).decode()
    assert info.h1 == f"h1:{expected}"
    assert info.executable == EXE


def test_bare_executable_name_is_accepted(tmp_path: Path) -> None:
    assert _inspect(tmp_path, zip_bytes({"terraform-provider-null": b"x"})).executable == (
        "terraform-provider-null"
    )


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ({"README.md": b"x"}, "no executable named terraform-provider-null"),
        ({"bin/" + EXE: b"x"}, "inside a directory"),
        ({EXE: b"x", "../escape": b"x"}, "'..'"),
        ({EXE: b"x", "/etc/passwd": b"x"}, "absolute"),
        ({EXE: b"x", "C:/evil": b"x"}, "absolute"),
        ({EXE: b"x", "a\\b": b"x"}, "absolute"),
        ({EXE: b"x", "docs/": b""}, "directory entry"),
        ({EXE: b"x", "bad\nname": b"x"}, "control character"),
        ({EXE: b"x", EXE + ".exe": b"x"}, "several files could be the executable"),
    ],
)
def test_bad_layouts_are_refused(tmp_path: Path, members: dict[str, bytes], message: str) -> None:
    with pytest.raises(PackageError, match=message):
        _inspect(tmp_path, zip_bytes(members))


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_duplicate_entries_are_refused(tmp_path: Path) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for _ in range(2):
            info = zipfile.ZipInfo(EXE)
            info.external_attr = 0o100755 << 16
            archive.writestr(info, b"x")
    with pytest.raises(PackageError, match="appears twice"):
        _inspect(tmp_path, out.getvalue())


def test_symlink_entries_are_refused(tmp_path: Path) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        exe = zipfile.ZipInfo(EXE)
        exe.external_attr = 0o100755 << 16
        archive.writestr(exe, b"x")
        link = zipfile.ZipInfo("link")
        link.external_attr = 0o120777 << 16
        archive.writestr(link, b"/etc/passwd")
    with pytest.raises(PackageError, match="symlink"):
        _inspect(tmp_path, out.getvalue())


def test_executable_needs_an_execute_bit_except_on_windows(tmp_path: Path) -> None:
    plain = zip_bytes({EXE: b"x"}, mode=0o100644)
    with pytest.raises(PackageError, match="execute permission"):
        _inspect(tmp_path, plain)
    fat = zip_bytes({EXE: b"x"}, create_system=0)
    with pytest.raises(PackageError, match="execute permission"):
        _inspect(tmp_path, fat)
    assert _inspect(tmp_path, zip_bytes({EXE + ".exe": b"x"}, mode=0o100644), os_="windows")


def test_not_a_zip_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PackageError, match="not a readable zip"):
        _inspect(tmp_path, b"PK\x03\x04 definitely not a zip")


def test_zip_bomb_is_stopped_by_the_unpacked_limit(tmp_path: Path) -> None:
    bomb = zip_bytes({EXE: b"\0" * 5_000_000})
    assert len(bomb) < 20_000  # tiny on disk
    small = PackageLimits(max_package_bytes=1_000_000, max_unpacked_bytes=1_000_000, max_files=5)
    with pytest.raises(PackageError, match="unpacks to"):
        _inspect(tmp_path, bomb, limits=small)


def test_lying_sizes_are_stopped_while_reading(tmp_path: Path) -> None:
    # The central directory claims a tiny file; the data says otherwise. zipfile
    # stops at the declared size and the CRC check fails: refused, not read on.
    data = bytearray(zip_bytes({EXE: b"A" * 100_000}))
    cd = data.rindex(b"PK\x01\x02")
    data[cd + 24 : cd + 28] = (10).to_bytes(4, "little")  # uncompressed size
    with pytest.raises(PackageError):
        _inspect(tmp_path, bytes(data))


def test_entry_count_and_package_size_limits(tmp_path: Path) -> None:
    many = zip_bytes({EXE: b"x", **{f"f{i}": b"x" for i in range(10)}})
    tight = PackageLimits(max_package_bytes=10_000_000, max_unpacked_bytes=10_000_000, max_files=5)
    with pytest.raises(PackageError, match="entries"):
        _inspect(tmp_path, many, limits=tight)
    tiny = PackageLimits(max_package_bytes=10, max_unpacked_bytes=10_000_000, max_files=5)
    with pytest.raises(PackageError, match="limit"):
        _inspect(tmp_path, zip_bytes({EXE: b"x"}), limits=tiny)


def test_entries_are_counted_before_zipfile_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Directory entries count like files, and a zip over the limit is refused
    from its central directory's headers, before zipfile makes an object of each."""
    path = _write(tmp_path, zip_of_directories("null", "2.1.2", 200))
    read = count_zip_entries_read(monkeypatch)
    tight = PackageLimits(max_package_bytes=10_000_000, max_unpacked_bytes=10_000_000, max_files=5)
    with pytest.raises(PackageError, match="more than 5 entries"):
        inspect_package(path, "null", "linux", tight)
    assert read == []


def _layouts(monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    members = {EXE: b"x", "a/": b"", "b": b"y" * 100, "c/": b"", "d": b""}
    plain = zip_bytes(members)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.comment = b"c" * 60_000
    with monkeypatch.context() as patched:
        patched.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 2)  # zip64 end records for 5
        zip64 = io.BytesIO()
        with zipfile.ZipFile(zip64, "w") as archive:
            for name, data in members.items():
                archive.writestr(name, data)
    return {
        "plain": plain,
        "commented": out.getvalue(),
        "prepended": b"#!/bin/sh\nexit 0\n" * 100 + plain,
        "zip64": zip64.getvalue(),
    }


@pytest.mark.parametrize("layout", ["plain", "commented", "prepended", "zip64"])
def test_entries_are_counted_where_zipfile_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    data = _layouts(monkeypatch)[layout]
    assert len(zipfile.ZipFile(io.BytesIO(data)).infolist()) == 5
    check_zip_entries(io.BytesIO(data), 5)
    with pytest.raises(ArchiveTooLarge, match="more than 4 entries"):
        check_zip_entries(io.BytesIO(data), 4)

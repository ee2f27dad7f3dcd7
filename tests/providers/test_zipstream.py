"""`h1:` computed while a zip arrives (gitreg/providers/zipstream.py) against the
whole-file pass: the same hashes and the same refusals over a corpus of zips, and
the whole-file pass whenever the stream and the central directory disagree."""

from __future__ import annotations

import hashlib
import io
import random
import warnings
import zipfile
from pathlib import Path

import pytest

from gitreg.errors import PackageError
from gitreg.providers.package import PackageInfo, PackageLimits, inspect_package
from gitreg.providers.zipstream import StreamedMembers
from tests.support.provider_dist import zip_bytes

LIMITS = PackageLimits(max_package_bytes=50_000_000, max_unpacked_bytes=20_000_000, max_files=50)
EXE = "terraform-provider-null_v2.1.2_x4"
RNG = random.Random(16)
BINARY = RNG.randbytes(300_000) + b"\0" * 200_000  # some incompressible, some not


class _Unseekable(io.RawIOBase):
    """zipfile writes data descriptors (bit 3) to a stream it cannot seek back in,
    as Go's archive/zip (goreleaser) does for every member."""

    def __init__(self) -> None:
        self.out = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        view = memoryview(data)  # type: ignore[arg-type]
        self.out += view
        return len(view)


def _zip(
    members: dict[str, bytes],
    method: int = zipfile.ZIP_DEFLATED,
    descriptors: bool = False,
    zip64: bool = False,
) -> bytes:
    seekable = io.BytesIO()
    unseekable = _Unseekable()
    out: io.IOBase = unseekable if descriptors else seekable
    with zipfile.ZipFile(out, "w", method) as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o100755 << 16
            info.compress_type = method
            with archive.open(info, "w", force_zip64=zip64) as member:
                member.write(data)
            info.create_system = 3
    return bytes(unseekable.out) if descriptors else seekable.getvalue()


def _tampered_crc() -> bytes:
    data = bytearray(zip_bytes({EXE: BINARY}))
    cd = data.rindex(b"PK\x01\x02")
    data[cd + 16 : cd + 20] = b"\0\0\0\0"
    return bytes(data)


def _lying_size() -> bytes:
    data = bytearray(zip_bytes({EXE: b"A" * 100_000}))
    cd = data.rindex(b"PK\x01\x02")
    data[cd + 24 : cd + 28] = (10).to_bytes(4, "little")
    return bytes(data)


def _renamed_local() -> bytes:
    data = bytearray(zip_bytes({EXE: b"binary", "README": b"x"}))
    first = data.index(b"README")  # the local header's copy, before the central one
    data[first : first + 6] = b"READMX"
    return bytes(data)


def _flipped_data() -> bytes:
    data = bytearray(zip_bytes({EXE: BINARY}))
    data[200] ^= 0xFF  # inside the deflated data: unreadable or a wrong CRC
    return bytes(data)


def _duplicate() -> bytes:
    out = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(out, "w") as archive:
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate it writes
        for _ in range(2):
            info = zipfile.ZipInfo(EXE)
            info.external_attr = 0o100755 << 16
            info.create_system = 3
            archive.writestr(info, b"x")
    return out.getvalue()


VALID = {
    "deflated": zip_bytes({EXE: BINARY, "CHANGELOG.md": b"notes\n", "docs/README": b"hi"}),
    "stored": _zip({EXE: BINARY, "LICENSE": b"MIT"}, method=zipfile.ZIP_STORED),
    "data descriptors": _zip({EXE: BINARY, "empty": b"", "LICENSE": b"x"}, descriptors=True),
    "zip64": _zip({EXE: BINARY, "LICENSE": b"MIT"}, zip64=True),
    "zip64 and data descriptors": _zip({EXE: BINARY}, descriptors=True, zip64=True),
    "empty member": zip_bytes({EXE: b"", "LICENSE": b""}),
}
REFUSED = {
    "tampered CRC": _tampered_crc(),
    "lying size": _lying_size(),
    "local name differs": _renamed_local(),
    "flipped data byte": _flipped_data(),
    "duplicate names": _duplicate(),
    "zip bomb": zip_bytes({EXE: b"\0" * 30_000_000}),
    "no executable": zip_bytes({"README": b"x"}),
    "not a zip": b"PK\x03\x04 definitely not a zip",
}
# Layouts the parser does not follow: the whole-file pass decides alone.
UNFOLLOWED = {
    "prepended bytes": b"#!/bin/sh\nexit 0\n" + zip_bytes({EXE: b"binary"}),
    "stored with data descriptors": _zip(
        {EXE: BINARY}, method=zipfile.ZIP_STORED, descriptors=True
    ),
    "bzip2": _zip({EXE: BINARY}, method=zipfile.ZIP_BZIP2),
}


def _streamed(data: bytes, piece: int) -> StreamedMembers:
    streamed = StreamedMembers(LIMITS.max_unpacked_bytes, LIMITS.max_files)
    for start in range(0, len(data), piece):
        streamed.feed(data[start : start + piece])
    return streamed


def _both(tmp_path: Path, data: bytes, piece: int) -> tuple[object, object, StreamedMembers]:
    """(whole-file result or error, streamed result or error, the parser)."""
    path = tmp_path / "p.zip"
    path.write_bytes(data)
    outcomes: list[object] = []
    streamed = _streamed(data, piece)
    for given in (None, streamed):
        try:
            outcomes.append(inspect_package(path, "null", "linux", LIMITS, None, given))
        except PackageError as exc:
            outcomes.append(str(exc))
    return outcomes[0], outcomes[1], streamed


def _member_digests(data: bytes) -> dict[str, str]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {n: hashlib.sha256(archive.read(n)).hexdigest() for n in archive.namelist()}


@pytest.mark.parametrize("piece", [1, 13, 4096, 65536, 10**9])
@pytest.mark.parametrize("kind", VALID)
def test_streamed_h1_equals_the_whole_file_pass(tmp_path: Path, kind: str, piece: int) -> None:
    data = VALID[kind]
    whole, streamed_result, streamed = _both(tmp_path, data, piece)
    assert isinstance(whole, PackageInfo)
    assert streamed_result == whole
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        # The hashes came from the stream, not from the fallback.
        assert streamed.digests(archive.infolist()) == _member_digests(data), streamed.reason


@pytest.mark.parametrize("piece", [7, 65536])
@pytest.mark.parametrize("kind", REFUSED)
def test_streamed_path_refuses_what_the_whole_file_pass_refuses(
    tmp_path: Path, kind: str, piece: int
) -> None:
    whole, streamed_result, _ = _both(tmp_path, REFUSED[kind], piece)
    assert isinstance(whole, str)  # refused, with this message
    assert streamed_result == whole


@pytest.mark.parametrize("kind", ["tampered CRC", "lying size", "local name differs"])
def test_disagreement_with_the_central_directory_gives_no_hashes(kind: str) -> None:
    data = REFUSED[kind]
    streamed = _streamed(data, 4096)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert streamed.digests(archive.infolist()) is None
    assert streamed.reason


@pytest.mark.parametrize("kind", UNFOLLOWED)
def test_unfollowed_layouts_fall_back_to_the_whole_file_pass(tmp_path: Path, kind: str) -> None:
    data = UNFOLLOWED[kind]
    whole, streamed_result, streamed = _both(tmp_path, data, 65536)
    assert isinstance(whole, PackageInfo)
    assert streamed_result == whole
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert streamed.digests(archive.infolist()) is None
    assert streamed.reason


def test_a_bomb_stops_inflating_at_the_limit() -> None:
    bomb = zip_bytes({EXE: b"\0" * 30_000_000})
    streamed = StreamedMembers(max_unpacked=1_000_000, max_files=5)
    streamed.feed(bomb)
    assert "limit" in streamed.reason


def test_a_stream_cut_short_gives_no_hashes() -> None:
    data = VALID["deflated"]
    streamed = _streamed(data[: len(data) // 2], 4096)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert streamed.digests(archive.infolist()) is None

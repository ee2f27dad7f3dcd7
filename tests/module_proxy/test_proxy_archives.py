"""Plain https archives as module locations: rebuilt by gitreg's own archive builder."""

from __future__ import annotations

import asyncio
import io
import logging
import shutil
import tarfile
import threading
import zipfile
from pathlib import Path
from typing import Any

import pytest

from gitreg.addresses import module_address
from gitreg.errors import UpstreamError
from gitreg.module_proxy.service import ModuleProxyService
from tests.module_proxy.conftest import MODULE, Upstream, make_service

ADDRESS = module_address(*MODULE)


def _tar_gz(entries: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return out.getvalue()


def _names(service: ModuleProxyService, sha256: str) -> list[str]:
    with service.blobs.open(sha256) as raw, tarfile.open(fileobj=raw, mode="r:gz") as tar:
        return sorted(m.name for m in tar.getmembers() if not m.isdir())


def _serve(upstream: Upstream, name: str, body: bytes, suffix: str = "") -> None:
    upstream.registry.files[name] = body
    location = f"{upstream.registry_url}/files/{name}{suffix}"
    upstream.registry.modules[MODULE]["3.0.0"] = location


def test_a_tar_gz_with_a_subdir_is_rebuilt_and_pinned_by_sha256(
    service: ModuleProxyService, upstream: Upstream
) -> None:
    body = _tar_gz(
        {"modules/vpc/main.tf": b'output "x" {\n  value = 1\n}\n', "README.md": b"# x\n"},
        links={"modules/vpc/escape": "../../../../etc/passwd", "modules/vpc/ok": "main.tf"},
    )
    _serve(upstream, "vpc.tar.gz", body, "//modules/vpc")
    record = asyncio.run(service.cached(ADDRESS, "3.0.0"))
    assert record.subdir == "modules/vpc" and record.ref == ""
    assert record.commit_sha.startswith("sha256:")
    # The escaping symlink is left out by the same rules as own modules.
    assert _names(service, record.archive_sha256) == [
        "README.md",
        "modules/vpc/main.tf",
        "modules/vpc/ok",
    ]


def test_a_zip_named_by_the_archive_parameter(
    service: ModuleProxyService, upstream: Upstream
) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("main.tf", 'output "x" {\n  value = 2\n}\n')
        archive.writestr("../outside.tf", "# a name that climbs out\n")
    _serve(upstream, "download", out.getvalue(), "?archive=zip")
    record = asyncio.run(service.cached(ADDRESS, "3.0.0"))
    assert _names(service, record.archive_sha256) == ["main.tf"]


def test_a_huge_archive_is_refused(tmp_path: Path, upstream: Upstream) -> None:
    service = make_service(tmp_path, upstream.registry_url, max_fetch_bytes=10_000)
    _serve(upstream, "huge.tar.gz", _tar_gz({"a.bin": __import__("os").urandom(50_000)}))
    with pytest.raises(UpstreamError, match="more than 10000 bytes"):
        asyncio.run(service.cached(ADDRESS, "3.0.0"))
    assert service.cached_versions() == []


def test_an_archive_bomb_is_refused_before_it_is_unpacked(
    tmp_path: Path, upstream: Upstream
) -> None:
    service = make_service(tmp_path, upstream.registry_url, max_archive_bytes=100_000)
    _serve(upstream, "bomb.tar.gz", _tar_gz({"zeros": bytes(10_000_000)}))
    with pytest.raises(UpstreamError, match="100000 bytes"):
        asyncio.run(service.cached(ADDRESS, "3.0.0"))
    assert service.cached_versions() == []


def test_a_tar_whose_header_unpacks_to_megabytes_is_refused(
    service: ModuleProxyService, upstream: Upstream
) -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("main.tf")
        info.pax_headers = {"comment": "A" * (8 * 1024 * 1024)}
        tar.addfile(info, io.BytesIO(b""))
    _serve(upstream, "header.tar.gz", out.getvalue())
    with pytest.raises(UpstreamError, match="the archive cannot be read: a tar header of"):
        asyncio.run(service.cached(ADDRESS, "3.0.0"))
    assert service.cached_versions() == []


def test_the_temp_directory_is_made_and_removed_off_the_event_loop(
    service: ModuleProxyService, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The download and the unpacked repository's loose objects are removed by a
    worker thread: an rmtree on the loop would stall every request meanwhile."""
    removed_on: list[bool] = []
    rmtree = shutil.rmtree

    def recording(path: Any, *args: Any, **kwargs: Any) -> None:
        if Path(path).name.startswith("proxy-"):
            removed_on.append(threading.current_thread() is threading.main_thread())
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", recording)
    _serve(upstream, "vpc.tar.gz", _tar_gz({"main.tf": b'output "x" {\n  value = 3\n}\n'}))
    asyncio.run(service.cached(ADDRESS, "3.0.0"))
    assert removed_on == [False]
    assert not list(service.workdir.glob("proxy-*"))


def _special_entries(count: int, kind: bytes, escaping: int = 0) -> bytes:
    """A tar.gz of `count` entries of tar type `kind` (FIFOs, devices), `escaping`
    symlinks out of the tree, and one file."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for n in range(count):
            info = tarfile.TarInfo(f"dev/entry{n}")
            info.type = kind
            tar.addfile(info)
        for n in range(escaping):
            link = tarfile.TarInfo(f"link{n}")
            link.type, link.linkname = tarfile.SYMTYPE, "../../etc/passwd"
            tar.addfile(link)
        readme = tarfile.TarInfo("main.tf")
        tar.addfile(readme, io.BytesIO(b""))
    return out.getvalue()


def _proxy_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "gitreg.module_proxy"]


@pytest.mark.parametrize(
    "kind", [tarfile.FIFOTYPE, tarfile.CHRTYPE, tarfile.DIRTYPE], ids=["fifo", "device", "dir"]
)
def test_entries_that_are_not_files_count_toward_the_file_limit(
    tmp_path: Path, upstream: Upstream, caplog: pytest.LogCaptureFixture, kind: bytes
) -> None:
    """A few hundred thousand FIFOs once cost 15.7 s and a log line each: every
    entry counts, so the archive stops at the limit, with nothing cached."""
    service = make_service(tmp_path, upstream.registry_url, max_archive_files=10)
    _serve(upstream, "fifos.tar.gz", _special_entries(50, kind))
    with pytest.raises(UpstreamError, match="more than 10 entries"):
        asyncio.run(service.cached(ADDRESS, "3.0.0"))
    assert service._store.versions() == []
    assert not [m for m in _proxy_warnings(caplog) if "dev/" in m]


def test_a_zip_of_directories_counts_toward_the_file_limit(
    tmp_path: Path, upstream: Upstream
) -> None:
    service = make_service(tmp_path, upstream.registry_url, max_archive_files=10)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for n in range(50):
            archive.writestr(f"d{n}/", "")
        archive.writestr("main.tf", "")
    _serve(upstream, "dirs", out.getvalue(), "?archive=zip")
    with pytest.raises(UpstreamError, match="more than 10 entries"):
        asyncio.run(service.cached(ADDRESS, "3.0.0"))
    assert service._store.versions() == []


def test_entries_left_out_are_logged_in_one_line(
    tmp_path: Path, upstream: Upstream, caplog: pytest.LogCaptureFixture
) -> None:
    """FIFOs are tallied while reading, escaping symlinks are refused by the
    archive builder: all of it is one warning."""
    service = make_service(tmp_path, upstream.registry_url, max_archive_files=100)
    _serve(upstream, "fifos.tar.gz", _special_entries(40, tarfile.FIFOTYPE, escaping=6))
    with caplog.at_level(logging.INFO, "gitreg.module_proxy"):
        record = asyncio.run(service.cached(ADDRESS, "3.0.0"))
    assert _names(service, record.archive_sha256) == ["main.tf"]
    left_out = [m for m in _proxy_warnings(caplog) if "leaves out" in m]
    assert len(left_out) == 1
    assert "40 entries that are not files, directories or symlinks (40 FIFO)" in left_out[0]
    assert "'dev/entry0'" in left_out[0]
    assert "link0: symlink to '../../etc/passwd' left out" in left_out[0]
    assert left_out[0].endswith("; and 4 more")


def test_a_zip_symlink_is_not_unpacked_past_the_file_size_limit(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its size is checked before its bytes are read, as for a file: a symlink
    entry of a few megabytes of zeros is refused without unpacking it."""
    service = make_service(tmp_path, upstream.registry_url, max_file_bytes=1000)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        link = zipfile.ZipInfo("link")
        link.external_attr = 0o120777 << 16
        archive.writestr(link, bytes(5_000_000))
    unpacked: list[int] = []
    read = zipfile.ZipExtFile.read

    def counting(self: zipfile.ZipExtFile, n: int | None = -1) -> bytes:
        data = read(self, n)
        unpacked.append(len(data))
        return data

    monkeypatch.setattr(zipfile.ZipExtFile, "read", counting)
    _serve(upstream, "link", out.getvalue(), "?archive=zip")
    with pytest.raises(UpstreamError, match="over 1000 bytes"):
        asyncio.run(service.cached(ADDRESS, "3.0.0"))
    assert sum(unpacked) <= 1001

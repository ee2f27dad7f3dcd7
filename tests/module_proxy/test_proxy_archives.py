"""Plain https archives as module locations: rebuilt by gitreg's own archive builder."""

from __future__ import annotations

import asyncio
import io
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
    # The escaping symlink is left out by the same rules as own modules (A1).
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

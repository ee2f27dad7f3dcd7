"""The pull-through cache against a public-shaped registry and a real git HTTPS server."""

from __future__ import annotations

import asyncio
import tarfile
from pathlib import Path

import pytest

from gitreg.addresses import module_address
from gitreg.errors import NotFound, UpstreamError
from gitreg.module_proxy.service import ModuleProxyService
from tests.module_proxy.conftest import MODULE, Upstream, make_service

ADDRESS = module_address(*MODULE)


def _names(service: ModuleProxyService, sha256: str) -> list[str]:
    with service.blobs.open(sha256) as raw, tarfile.open(fileobj=raw, mode="r:gz") as tar:
        return sorted(tar.getnames())


def test_first_download_fetches_archives_and_pins_the_commit(
    service: ModuleProxyService, upstream: Upstream
) -> None:
    assert asyncio.run(service.versions(ADDRESS)) == ["1.2.0"]
    record = asyncio.run(service.cached(ADDRESS, "1.2.0"))
    assert record.commit_sha == upstream.work.rev("v1.2.0^{commit}")
    assert record.location == upstream.location()
    assert record.git_url == f"{upstream.git_url}/org/repo.git"
    assert record.ref == "v1.2.0"
    assert _names(service, record.archive_sha256) == ["README.md", "main.tf"]
    # `v1.2.0` in the path names the same version.
    assert asyncio.run(service.cached(ADDRESS, "v1.2.0")) == record


def test_a_cached_version_serves_with_registry_and_git_down(
    tmp_path: Path, service: ModuleProxyService, upstream: Upstream
) -> None:
    first = asyncio.run(service.cached(ADDRESS, "1.2.0"))
    upstream.registry.down = True
    upstream.git.repos.clear()
    service._fresh.clear()  # the version list is due for a refresh
    assert asyncio.run(service.versions(ADDRESS)) == ["1.2.0"]  # stale-if-error
    assert asyncio.run(service.cached(ADDRESS, "1.2.0")) == first
    with pytest.raises(UpstreamError):
        asyncio.run(service.cached(ADDRESS, "1.3.0"))  # never cached: the failure shows


def test_unknown_versions_and_namespaces_are_not_found(
    service: ModuleProxyService, upstream: Upstream
) -> None:
    with pytest.raises(NotFound):
        asyncio.run(service.cached(ADDRESS, "9.9.9"))
    with pytest.raises(NotFound):
        asyncio.run(service.cached(module_address("someone", "vpc", "aws"), "1.2.0"))
    assert not service.handles("someone") and service.handles("Terraform-AWS-Modules")


def test_concurrent_first_downloads_share_one_fetch(
    service: ModuleProxyService, upstream: Upstream
) -> None:
    async def both() -> list[object]:
        return list(await asyncio.gather(*(service.cached(ADDRESS, "1.2.0") for _ in range(5))))

    results = asyncio.run(both())
    assert all(r == results[0] for r in results)
    downloads = [p for p in upstream.registry.requests if p.endswith("/download")]
    assert len(downloads) == 1


def test_a_moved_tag_keeps_the_first_bytes_and_is_reported(
    service: ModuleProxyService, upstream: Upstream
) -> None:
    first = asyncio.run(service.cached(ADDRESS, "1.2.0"))
    upstream.work.write("main.tf", 'output "x" {\n  value = "moved"\n}\n')
    moved_to = upstream.work.commit("retagged")
    upstream.work.tag("v1.2.0", annotated=True, force=True)
    upstream.push()
    moves = asyncio.run(service.check_moves())
    assert [(m.version, m.cached_commit, m.upstream_commit) for m in moves] == [
        ("1.2.0", first.commit_sha, moved_to)
    ]
    assert asyncio.run(service.check_moves()) == []  # reported once
    assert service.moves() == moves
    assert asyncio.run(service.cached(ADDRESS, "1.2.0")) == first


def test_a_symlink_escaping_the_tree_is_left_out(
    service: ModuleProxyService, upstream: Upstream
) -> None:
    (upstream.work.path / "escape").symlink_to("../../../etc/passwd")
    upstream.work.commit("symlink")
    upstream.work.tag("v1.3.0")
    upstream.push()
    upstream.registry.modules[MODULE]["1.3.0"] = upstream.location("v1.3.0")
    record = asyncio.run(service.cached(ADDRESS, "1.3.0"))
    assert "escape" not in _names(service, record.archive_sha256)


def test_a_huge_repository_is_refused_and_nothing_is_cached(
    tmp_path: Path, upstream: Upstream
) -> None:
    service = make_service(tmp_path, upstream.registry_url, max_fetch_bytes=2000)
    upstream.work.write("big.bin", __import__("os").urandom(50_000).hex())
    upstream.work.commit("big")
    upstream.work.tag("v1.4.0")
    upstream.push()
    upstream.registry.modules[MODULE]["1.4.0"] = upstream.location("v1.4.0")
    with pytest.raises(UpstreamError, match="exceeds 2000 bytes"):
        asyncio.run(service.cached(ADDRESS, "1.4.0"))
    assert service.cached_versions() == []


def test_a_slow_drip_is_cut_off(tmp_path: Path, upstream: Upstream) -> None:
    service = make_service(tmp_path, upstream.registry_url, git_timeout=0.2)
    upstream.git.drip_seconds = 0.3
    with pytest.raises(UpstreamError, match="too long"):
        asyncio.run(service.cached(ADDRESS, "1.2.0"))
    assert service.cached_versions() == []


@pytest.mark.parametrize(
    "location",
    [
        "git::https://169.254.169.254/org/repo.git?ref=v1.2.0",
        "file:///etc",
        "git::file:///srv/repo.git?ref=v1.2.0",
        "s3::https://s3.amazonaws.com/bucket/vpc.zip",
        "hg::https://example.com/repo",
    ],
)
def test_hostile_locations_are_refused(
    service: ModuleProxyService, upstream: Upstream, location: str
) -> None:
    upstream.registry.modules[MODULE]["1.5.0"] = location
    with pytest.raises(UpstreamError, match="refused"):
        asyncio.run(service.cached(ADDRESS, "1.5.0"))
    assert service.cached_versions() == []


def test_past_the_stale_window_only_cached_versions_are_listed(
    tmp_path: Path, upstream: Upstream
) -> None:
    service = make_service(tmp_path, upstream.registry_url, mirror_stale_if_error=0.0)
    upstream.registry.modules[MODULE]["1.3.0"] = upstream.location()
    assert asyncio.run(service.versions(ADDRESS)) == ["1.2.0", "1.3.0"]
    upstream.registry.down = True
    service._fresh.clear()
    with pytest.raises(UpstreamError):  # nothing cached: the failure shows (502)
        asyncio.run(service.versions(ADDRESS))
    upstream.registry.down = False
    asyncio.run(service.cached(ADDRESS, "1.2.0"))
    upstream.registry.down = True
    service._fresh.clear()
    assert asyncio.run(service.versions(ADDRESS)) == ["1.2.0"]


@pytest.mark.slow
def test_a_git_redirect_is_followed_only_to_allowed_addresses(
    service: ModuleProxyService, upstream: Upstream
) -> None:
    upstream.registry.modules[MODULE]["1.6.0"] = (
        f"git::{upstream.registry_url}/redirect/org/repo.git?ref=v1.2.0"
    )
    upstream.registry.redirect_to = upstream.git_url + "/"
    moved = asyncio.run(service.cached(ADDRESS, "1.6.0"))  # a renamed repository still works
    assert moved.commit_sha == upstream.work.rev("v1.2.0^{commit}")
    upstream.registry.modules[MODULE]["1.7.0"] = upstream.registry.modules[MODULE]["1.6.0"]
    upstream.registry.redirect_to = "https://169.254.169.254/"
    with pytest.raises(UpstreamError, match=r"refused upstream URL .*169\.254\.169\.254"):
        asyncio.run(service.cached(ADDRESS, "1.7.0"))


def test_a_fresh_version_list_is_answered_without_the_database(
    service: ModuleProxyService, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = asyncio.run(service.versions_body(ADDRESS))

    def unreachable(*args: object) -> None:
        raise AssertionError("the version list read the database again")

    monkeypatch.setattr(service._store, "index", unreachable)
    monkeypatch.setattr(service._store, "versions", unreachable)
    assert asyncio.run(service.versions_body(ADDRESS)) == first  # the cached read path
    service.cache.invalidate()  # a commit (here or on another replica): read again
    with pytest.raises(AssertionError, match="read the database again"):
        asyncio.run(service.versions_body(ADDRESS))

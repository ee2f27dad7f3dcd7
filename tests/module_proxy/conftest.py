"""A public-shaped registry pointing at a real git HTTPS server, and a proxy service."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitreg.cache import MetadataCache
from gitreg.module_proxy.config import parse_module_proxy
from gitreg.module_proxy.options import proxy_options
from gitreg.module_proxy.service import ModuleProxyService
from gitreg.module_proxy.store_sql import ModuleProxyStore
from gitreg.server.tls import ensure_local_tls
from gitreg.settings import Settings
from gitreg.storage.blobs import FileBlobStore
from gitreg.storage.index import SQLiteIndex
from tests.module_proxy.fakes import FakeModuleRegistry, GitServer, serve_registry
from tests.support.gitrepo import GitRepo, git, simple_module

MODULE = ("terraform-aws-modules", "vpc", "aws")


@dataclass
class Upstream:
    registry: FakeModuleRegistry
    git: GitServer
    work: GitRepo  # push to `bare` to change what the git server serves
    bare: Path
    registry_url: str
    git_url: str
    tls_dir: Path

    def location(self, ref: str = "v1.2.0", repo: str = "org/repo.git") -> str:
        return f"git::{self.git_url}/{repo}?ref={ref}"

    def push(self) -> None:
        git(self.work.path, "push", "-q", "--force", "--tags", str(self.bare), "main")
        # dulwich's server peels a tag from packed-refs even when a newer loose
        # ref overrides it; repacking keeps the fake advertising what git would.
        git(self.bare, "pack-refs", "--all")


@contextlib.contextmanager
def upstream_servers(root: Path) -> Iterator[Upstream]:
    """A module repository tagged v1.2.0 behind a real git HTTPS server, and a
    public-shaped registry whose 1.2.0 points at it (`SSL_CERT_FILE` must name
    `ca_pem(root)` for gitreg to trust them)."""
    work = GitRepo(root / "work")
    simple_module(work)
    work.commit("v1.2.0")
    work.tag("v1.2.0", annotated=True)
    bare = root / "bare.git"
    git(root, "clone", "-q", "--bare", str(work.path), str(bare))
    registry = FakeModuleRegistry()
    server = GitServer({"org/repo.git": bare})
    tls_dir = root / "tls"
    with server.serve(tls_dir) as git_url, serve_registry(registry, tls_dir) as registry_url:
        up = Upstream(registry, server, work, bare, registry_url, git_url, tls_dir)
        registry.modules[MODULE] = {"1.2.0": up.location()}
        yield up


def ca_pem(root: Path) -> Path:
    return ensure_local_tls(root / "tls", ["127.0.0.1"]).ca_cert


@pytest.fixture
def upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Upstream]:
    # gitreg trusts the test CA only through SSL_CERT_FILE, as in production.
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_pem(tmp_path)))
    with upstream_servers(tmp_path) as up:
        yield up


def make_service(tmp_path: Path, registry_url: str, **limits: object) -> ModuleProxyService:
    table = {"host": "registry.terraform.io", "url": registry_url, "namespaces": [MODULE[0]]}
    proxied = parse_module_proxy([table])
    settings = Settings(data_dir=tmp_path / "data", module_proxy=proxied, **limits)  # type: ignore[arg-type]
    index = SQLiteIndex(tmp_path / "index.sqlite3")
    return ModuleProxyService(
        proxy_options(settings),
        ModuleProxyStore(index),
        FileBlobStore(tmp_path / "blobs"),
        MetadataCache(index.data_version),
        tmp_path / "proxy-tmp",
    )


@pytest.fixture
def service(tmp_path: Path, upstream: Upstream) -> ModuleProxyService:
    return make_service(tmp_path, upstream.registry_url)

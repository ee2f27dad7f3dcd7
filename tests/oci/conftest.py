"""A registry holding a module and a provider in a public namespace (`open`)
and in a private one (`secret`), served in process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gitreg.addresses import local_provider_address
from gitreg.app import create_app
from gitreg.auth.tokens import new_token, token_hash
from gitreg.services import Services
from gitreg.settings import load_settings
from tests.support.gitrepo import GitRepo, simple_module
from tests.support.provider_dist import make_dist, public_armor, publisher_key

BASE = "https://registry.example.com"
PLATFORMS = ("darwin_arm64", "linux_amd64", "windows_386")


def publish_module(svc: Services, repo: GitRepo, namespace: str, tags: tuple[str, ...]) -> None:
    simple_module(repo, namespace)
    repo.commit()
    for tag in tags:
        repo.tag(tag)
    record = svc.index.add_repo(str(repo.path), f"{namespace}/vpc")
    svc.index.add_module(record.id, namespace, "vpc", "aws", "", "")
    svc.publisher.sync_repo(record)


def publish_provider(svc: Services, tmp_path: Path, namespace: str, version: str) -> None:
    svc.provider_publisher.keys.add(namespace, public_armor(publisher_key()))
    dist = make_dist("null", version, PLATFORMS, namespace.encode() * 64, publisher_key())
    directory = dist.write(tmp_path / f"dist-{namespace}-{version}")
    published = svc.providers.publish_files(
        local_provider_address(namespace, "null"), version, sorted(directory.iterdir()), sign=False
    )
    assert published.status == "published"


def make_token(svc: Services, scope: str, namespaces: list[str]) -> str:
    token = new_token()
    svc.auth.add_token(token_hash(token), token[:12], scope, namespaces, "", None)
    svc.cache.invalidate()
    return token


@pytest.fixture
def registry(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> Iterator[tuple[TestClient, Services]]:
    yield from serve(tmp_path, make_repo)


def serve(
    tmp_path: Path, make_repo: Callable[[str], GitRepo], **settings: object
) -> Iterator[tuple[TestClient, Services]]:
    """The registry of this directory's tests, with `settings` added."""
    loaded = load_settings(
        {"data_dir": tmp_path / "data", "public_url": BASE, "auth_fail_limit": 50, **settings},
        environ={},
    )
    app = create_app(loaded)
    svc: Services = app.state.services
    for namespace in ("open", "secret"):
        publish_module(svc, make_repo(namespace), namespace, ("v1.0.0", "v1.1.0-rc.1"))
        publish_provider(svc, tmp_path, namespace, "2.0.0")
    svc.auth.set_namespace_private("secret", True)
    svc.cache.invalidate()
    with TestClient(app, base_url="https://testserver") as client:
        yield client, svc

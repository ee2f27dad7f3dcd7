"""The catalog service: what the browse API and the web UI both call, with the
reader's visibility applied inside it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from gitreg.catalog.records import Listed
from gitreg.errors import BadRequest
from gitreg.mirror.store import MirrorPackage
from gitreg.module_proxy.store import ProxiedVersion
from gitreg.services import Services
from tests.support.gitrepo import GitRepo, released_module

MODULES = [("acme", "vpc", "aws"), ("acme", "vpc", "google"), ("Secret", "vpc", "aws")]


def _publish(svc: Services, make_repo: Callable[[str], GitRepo]) -> None:
    for namespace, name, system in MODULES:
        repo = released_module(make_repo(f"{namespace}-{name}-{system}"))
        record = svc.index.add_repo(str(repo.path), "")
        svc.index.add_module(record.id, namespace, name, system, "", "")
        svc.publisher.sync_repo(record)


def _public(namespace: str) -> bool:
    return namespace.lower() != "secret"


def _ids(found: list[Listed]) -> list[str]:
    return [str(m.record["id"]) for m in found]


def test_lists_and_searches_leave_out_what_the_reader_may_not_see(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    _publish(svc, make_repo)
    catalog = svc.catalog

    everything = asyncio.run(catalog.modules(lambda _ns: True))
    assert _ids(everything) == [
        "acme/vpc/aws/1.0.0",
        "acme/vpc/google/1.0.0",
        "Secret/vpc/aws/1.0.0",
    ]
    assert _ids(asyncio.run(catalog.modules(_public))) == _ids(everything)[:2]
    assert asyncio.run(catalog.modules(_public, "SECRET")) == []
    assert _ids(asyncio.run(catalog.modules(lambda _ns: True, "secret", "VPC"))) == [
        "Secret/vpc/aws/1.0.0"
    ]
    assert _ids(asyncio.run(catalog.modules(_public, "acme", "nope"))) == []

    hits = asyncio.run(catalog.search("vpc", _public))
    assert {m.namespace for m in hits} == {"acme"} and len(hits) == 2
    assert len(asyncio.run(catalog.search("vpc", lambda _ns: True))) == 3


def test_a_module_version_by_address_and_a_malformed_address(
    svc: Services, make_repo: Callable[[str], GitRepo]
) -> None:
    _publish(svc, make_repo)
    catalog = svc.catalog
    latest = catalog.module_version(("acme", "vpc", "aws"), None)
    assert latest is not None and latest.record["version"] == "1.0.0"
    assert latest.yanked is False and latest.moved == ()
    assert catalog.module_version(("acme", "vpc", "aws"), "9.9.9") is None
    assert catalog.module_version(("acme", "nope", "aws"), None) is None
    with pytest.raises(BadRequest):
        catalog.module_version(("acme", "bad name", "aws"), None)
    # The cached form answers a malformed address as a missing module.
    assert asyncio.run(catalog.module(("acme", "bad name", "aws"), None)) is None
    cached = asyncio.run(catalog.module(("ACME", "vpc", "aws"), None))
    assert cached is not None and cached.record == latest.record


def test_an_empty_registry_has_no_providers_mirrored_entries_or_releases(
    svc: Services,
) -> None:
    catalog = svc.catalog
    assert asyncio.run(catalog.providers(lambda _ns: True)) == []
    assert asyncio.run(catalog.mirrored(lambda _ns: True)) == ([], [])
    assert asyncio.run(catalog.provider("acme", "null")) is None
    assert catalog.provider_release("acme", "null", None) is None
    assert catalog.provider_doc("acme", "null", "1.0.0", "guides-start") is None


def _package(namespace: str, version: str, platform: str) -> MirrorPackage:
    key = f"registry.terraform.io/{namespace}/random"
    name = f"terraform-provider-random_{version}_{platform}.zip"
    sha = f"{namespace}-{version}-{platform}".encode().hex().ljust(64, "0")[:64]
    return MirrorPackage(
        key, version, platform, name, sha, 10, "h1:x", ("5.0",), "", "https://e.com/x", 1.0
    )


def _proxied(namespace: str, version: str) -> ProxiedVersion:
    host = "registry.terraform.io"
    return ProxiedVersion(
        f"{host}/{namespace}/label/null",
        version,
        host,
        namespace,
        "label",
        "null",
        f"git::https://example.com/x.git?ref={version}",
        "https://example.com/x.git",
        version,
        "",
        "c" * 40,
        version.encode().hex().ljust(64, "d")[:64],
        10,
        1.0,
    )


def test_mirrored_entries_newest_first_and_only_of_namespaces_the_reader_may_see(
    svc: Services,
) -> None:
    for namespace in ("hashicorp", "secret"):
        for version, platform in (("3.6.0", "linux_amd64"), ("3.10.0", "darwin_arm64")):
            svc.mirror._store.add_package(_package(namespace, version, platform))
        for version in ("0.9.0", "0.25.0"):
            svc.module_proxy._store.add_version(_proxied(namespace, version))
    providers, modules = asyncio.run(svc.catalog.mirrored(_public))
    assert [(p.address, p.versions, p.detail) for p in providers] == [
        (
            "registry.terraform.io/hashicorp/random",
            ("3.10.0", "3.6.0"),
            "darwin_arm64, linux_amd64",
        )
    ]
    assert [(m.address, m.versions) for m in modules] == [
        ("registry.terraform.io/hashicorp/label/null", ("0.25.0", "0.9.0"))
    ]
    everything = asyncio.run(svc.catalog.mirrored(lambda _ns: True))
    assert [len(found) for found in everything] == [2, 2]

"""The OCI store on both engines, and `/v2/` over PostgreSQL."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from gitreg.app import create_app
from gitreg.module_proxy.store import ProxiedVersion
from gitreg.module_proxy.store_sql import ModuleProxyStore
from gitreg.oci.store import ModuleZip
from gitreg.oci.store_sql import OciStore
from gitreg.services import Services
from gitreg.settings import load_settings
from gitreg.storage.index import Index
from gitreg.storage.records import NewVersion
from tests.oci.conftest import publish_module, serve
from tests.support.gitrepo import GitRepo
from tests.support.s3 import S3Bucket


def _version(index: Index, namespace: str, archive: str) -> None:
    repo = index.add_repo(f"/git/{namespace}", f"{namespace}/vpc")
    module = index.add_module(repo.id, namespace, "vpc", "aws", "", "")
    index.publish_version(
        NewVersion(
            module.id, "1.0.0", "1.0.0", "v1.0.0", "t" * 40, "c" * 40, "r" * 40, archive, 9, 0
        )
    )


def test_a_zip_is_recorded_once_and_the_first_wins(index: Index) -> None:
    store = OciStore(index)
    assert store.module_zip("a" * 64) is None
    first = ModuleZip("a" * 64, "b" * 64, 100, "zip+zlib-6")
    assert store.add_module_zip(first) == first
    assert store.add_module_zip(ModuleZip("a" * 64, "c" * 64, 7, "other")) == first
    assert store.module_zips(["a" * 64, "d" * 64]) == {"a" * 64: first}


def test_zip_owners_are_the_namespaces_of_their_archives(index: Index) -> None:
    store = OciStore(index)
    _version(index, "Secret", "a" * 64)
    ModuleProxyStore(index).add_version(
        ProxiedVersion(
            "registry.terraform.io/hashicorp/consul/aws",
            "1.0.0",
            "registry.terraform.io",
            "Hashicorp",
            "consul",
            "aws",
            "",
            "",
            "",
            "",
            "1" * 40,
            "e" * 64,
            3,
            1.0,
        )
    )
    store.add_module_zip(ModuleZip("a" * 64, "b" * 64, 100, "zip+zlib-6"))
    store.add_module_zip(ModuleZip("e" * 64, "f" * 64, 100, "zip+zlib-6"))
    store.add_module_zip(ModuleZip("9" * 64, "8" * 64, 100, "zip+zlib-6"))  # no version owns it
    assert sorted(store.blob_owners()) == [("hashicorp", "f" * 64), ("secret", "b" * 64)]


@pytest.fixture
def pg_registry(
    tmp_path: Path, make_repo: Callable[[str], GitRepo], postgres_database: object
) -> Iterator[tuple[TestClient, Services]]:
    key = tmp_path / "secret.key"
    key.write_text(os.urandom(32).hex())
    key.chmod(0o600)
    settings = load_settings(
        {
            "data_dir": tmp_path / "data",
            "database_url": postgres_database.url,  # type: ignore[attr-defined]
            "secret_key_file": key,
        },
        environ={},
    )
    app = create_app(settings)
    svc: Services = app.state.services
    publish_module(svc, make_repo("open"), "open", ("v1.0.0",))
    with TestClient(app, base_url="https://testserver") as client:
        yield client, svc


def test_v2_on_postgresql(pg_registry: tuple[TestClient, Services]) -> None:
    client, _ = pg_registry
    manifest = client.get("/v2/modules/open/vpc/aws/manifests/1.0.0")
    assert manifest.status_code == 200
    [layer] = manifest.json()["layers"]
    assert client.get(f"/v2/modules/open/vpc/aws/blobs/{layer['digest']}").status_code == 200
    digest = manifest.headers["docker-content-digest"]
    assert client.get(f"/v2/modules/open/vpc/aws/manifests/{digest}").status_code == 200


def test_blobs_redirect_to_s3_with_blob_downloads_redirect(
    tmp_path: Path, make_repo: Callable[[str], GitRepo], s3: S3Bucket
) -> None:
    served = serve(
        tmp_path,
        make_repo,
        blob_store=s3.url,
        s3_addressing="path",
        blob_downloads="redirect",
    )
    client, _ = next(served)
    name = "/v2/modules/open/vpc/aws"
    [layer] = client.get(f"{name}/manifests/1.0.0").json()["layers"]
    head = client.head(f"{name}/blobs/{layer['digest']}")
    assert head.status_code == 200 and int(head.headers["content-length"]) == layer["size"]
    answer = client.get(f"{name}/blobs/{layer['digest']}", follow_redirects=False)
    assert answer.status_code == 302
    fetched = httpx.get(answer.headers["location"])
    assert "sha256:" + hashlib.sha256(fetched.content).hexdigest() == layer["digest"]
    next(served, None)

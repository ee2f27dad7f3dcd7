"""What gitreg holds of other registries over `/v2/`: mirrored providers (the
platforms fetched so far, and an index that says whether that is all of them)
and proxied modules (the cached versions, zipped like gitreg's own)."""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from gitreg.mirror.store import CachedVersion, MirrorPackage
from gitreg.module_proxy.store import ProxiedVersion
from gitreg.services import Services
from tests.oci.conftest import make_token, serve
from tests.support.gitrepo import GitRepo

KEY = "registry.terraform.io/hashicorp/random"


def _zip(name: str) -> bytes:
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w") as out:
        out.writestr("terraform-provider-random", name.encode() * 100)
    return raw.getvalue()


def _hold(svc: Services, key: str, platform: str) -> MirrorPackage:
    data = _zip(f"{key}-{platform}")
    stored = svc.blobs.put_bytes(data)
    namespace = key.split("/")[1]
    return svc.mirror._store.add_package(
        MirrorPackage(
            key,
            "3.6.0",
            platform,
            f"terraform-provider-random_3.6.0_{platform}.zip",
            stored.sha256,
            stored.size,
            "h1:" + namespace,
            ("5.0",),
            "",
            "https://example.com/x.zip",
            1.0,
        )
    )


@pytest.fixture
def registry(
    tmp_path: Path, make_repo: Callable[[str], GitRepo]
) -> Iterator[tuple[TestClient, Services]]:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "gitreg.toml").write_text(
        '[[module_proxy]]\nhost = "registry.terraform.io"\nurl = "https://127.0.0.1:9"\n'
        'namespaces = ["cloudposse"]\n'
    )
    served = serve(tmp_path, make_repo, oci_module_downloads=True)
    client, svc = next(served)
    for key in (KEY, "registry.terraform.io/secret/random"):
        svc.mirror._store.save_index(
            key,
            "registry.terraform.io",
            key.split("/")[1],
            "random",
            [CachedVersion("3.6.0", ("5.0",), ("darwin_arm64", "linux_amd64"))],
            1.0,
        )
        _hold(svc, key, "linux_amd64")
    # A proxied version: the archive of gitreg's own open/vpc/aws 1.0.0, cached
    # as cloudposse/label/null 0.25.0 from the upstream.
    module = svc.index.find_module("open", "vpc", "aws")
    assert module is not None
    own = svc.index.version_by_key(module.id, "1.0.0")
    assert own is not None
    svc.module_proxy._store.add_version(
        ProxiedVersion(
            "registry.terraform.io/cloudposse/label/null",
            "0.25.0",
            "registry.terraform.io",
            "cloudposse",
            "label",
            "null",
            "",
            "",
            "",
            "",
            "1" * 40,
            own.archive_sha256,
            own.archive_size,
            1.0,
        )
    )
    svc.cache.invalidate()
    yield client, svc
    next(served, None)


def test_a_mirrored_provider_lists_the_platforms_held(
    registry: tuple[TestClient, Services],
) -> None:
    client, svc = registry
    for name in ("providers/hashicorp/random", f"providers/{KEY}"):
        assert client.get(f"/v2/{name}/tags/list").json()["tags"] == ["3.6.0"]
        index = client.get(f"/v2/{name}/manifests/3.6.0").json()
        assert index["annotations"]["land.gitreg.platforms"] == "partial"
        [entry] = index["manifests"]
        assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
    _hold(svc, KEY, "darwin_arm64")
    svc.cache.invalidate()
    index = client.get("/v2/providers/hashicorp/random/manifests/3.6.0").json()
    assert index["annotations"]["land.gitreg.platforms"] == "complete"
    assert len(index["manifests"]) == 2
    manifest = client.get(
        f"/v2/providers/hashicorp/random/manifests/{index['manifests'][1]['digest']}"
    )
    [layer] = manifest.json()["layers"]
    blob = client.get(f"/v2/providers/hashicorp/random/blobs/{layer['digest']}")
    assert "sha256:" + hashlib.sha256(blob.content).hexdigest() == layer["digest"]
    [held] = [p for p in svc.mirror._store.packages(KEY) if p.platform == "linux_amd64"]
    assert f"sha256:{held.sha256}" in {
        client.get(f"/v2/providers/hashicorp/random/manifests/{m['digest']}").json()["layers"][0][
            "digest"
        ]
        for m in index["manifests"]
    }


def test_a_mirrored_provider_follows_its_upstream_namespace_rules(
    registry: tuple[TestClient, Services],
) -> None:
    client, svc = registry
    svc.auth.set_namespace_private("secret", True)
    svc.cache.invalidate()
    assert client.get("/v2/providers/secret/random/tags/list").status_code == 401
    token = make_token(svc, "read", ["secret"])
    answer = client.get(
        "/v2/providers/secret/random/tags/list", headers={"authorization": f"Bearer {token}"}
    )
    assert answer.json()["tags"] == ["3.6.0"]


def test_a_proxied_module_serves_its_cached_versions(
    registry: tuple[TestClient, Services],
) -> None:
    client, _ = registry
    name = "/v2/modules/cloudposse/label/null"
    assert client.get(f"{name}/tags/list").json()["tags"] == ["0.25.0"]
    proxied = client.get(f"{name}/manifests/0.25.0").json()
    own = client.get("/v2/modules/open/vpc/aws/manifests/1.0.0").json()
    assert proxied["layers"][0]["digest"] == own["layers"][0]["digest"]  # same archive, same zip
    assert client.get(f"{name}/blobs/{proxied['layers'][0]['digest']}").status_code == 200


def test_a_proxied_module_download_sends_opentofu_to_v2(
    registry: tuple[TestClient, Services],
) -> None:
    client, _ = registry
    headers = {"accept": "application/json", "user-agent": "OpenTofu/1.11.0"}
    answer = client.get("/v1/modules/cloudposse/label/null/0.25.0/download", headers=headers)
    digest = client.get("/v2/modules/cloudposse/label/null/manifests/0.25.0").headers[
        "docker-content-digest"
    ]
    expected = f"oci://registry.example.com/modules/cloudposse/label/null?digest={digest}"
    assert answer.json()["location"] == expected

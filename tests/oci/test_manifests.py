"""Manifests and indexes byte for byte against what OpenTofu's documentation
(website/docs/cli/oci_registries/) and the OCI image spec show for the same
inputs. The expected documents are written out here by hand, not computed by
the code under test."""

from __future__ import annotations

import hashlib
import json

from gitreg.oci.manifests import (
    Layer,
    module_manifest,
    platform_config,
    provider_index,
    provider_manifest,
)

# provider-mirror.mdx: `oras push --artifact-platform linux/amd64` of
# terraform-provider-tls_4.0.6_linux_amd64.zip prints these two digests.
TLS_ZIP = "5f12d51fa9e87b6d29275fa58d1cd8681c0177a1d3a71a4e6c78ad7b011fa065"
LINUX_AMD64_CONFIG = "sha256:9d99a75171aea000c711b34c0e5e3f28d3d537dd99d110eafbfbc2bd8e52c2bf"
# image-spec v1.1 manifest.md, "Guidance for an Empty Descriptor".
EMPTY = (
    '{"mediaType":"application/vnd.oci.empty.v1+json",'
    '"digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",'
    '"size":2,"data":"e30="}'
)


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_platform_config_is_the_one_the_docs_show() -> None:
    config = platform_config("linux", "amd64")
    assert config.media_type == "application/vnd.oci.image.config.v1+json"
    assert config.body == b'{"architecture":"amd64","os":"linux"}'
    assert config.digest == LINUX_AMD64_CONFIG


def test_provider_platform_manifest_bytes() -> None:
    name = "terraform-provider-tls_4.0.6_linux_amd64.zip"
    made = provider_manifest("linux", "amd64", Layer(TLS_ZIP, 3141592, name))
    expected = (
        '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",'
        '"artifactType":"application/vnd.opentofu.provider-target",'
        '"config":{"mediaType":"application/vnd.oci.image.config.v1+json",'
        f'"digest":"{LINUX_AMD64_CONFIG}","size":37}},'
        f'"layers":[{{"mediaType":"archive/zip","digest":"sha256:{TLS_ZIP}","size":3141592,'
        f'"annotations":{{"org.opencontainers.image.title":"{name}"}}}}]}}'
    )
    assert made.body.decode() == expected
    assert made.digest == _digest(expected)
    assert made.media_type == "application/vnd.oci.image.manifest.v1+json"


def test_provider_index_bytes() -> None:
    linux = provider_manifest("linux", "amd64", Layer(TLS_ZIP, 10, "a.zip"))
    darwin = provider_manifest("darwin", "arm64", Layer("0" * 64, 11, "b.zip"))
    made = provider_index(
        [("darwin", "arm64", darwin), ("linux", "amd64", linux)], "4.0.6", complete=True
    )
    entry = (
        '{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{}","size":{},'
        '"platform":{{"architecture":"{}","os":"{}"}},'
        '"artifactType":"application/vnd.opentofu.provider-target"}}'
    )
    expected = (
        '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json",'
        '"artifactType":"application/vnd.opentofu.provider","manifests":['
        + entry.format(darwin.digest, darwin.size, "arm64", "darwin")
        + ","
        + entry.format(linux.digest, linux.size, "amd64", "linux")
        + '],"annotations":{"org.opencontainers.image.version":"4.0.6",'
        '"land.gitreg.platforms":"complete"}}'
    )
    assert made.body.decode() == expected
    assert made.media_type == "application/vnd.oci.image.index.v1+json"


def test_module_manifest_bytes() -> None:
    zip_sha = "ab" * 32
    made = module_manifest(Layer(zip_sha, 1234, "vpc-aws-1.0.0.zip"), "1.0.0")
    expected = (
        '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",'
        '"artifactType":"application/vnd.opentofu.modulepkg",'
        f'"config":{EMPTY},'
        f'"layers":[{{"mediaType":"archive/zip","digest":"sha256:{zip_sha}","size":1234,'
        '"annotations":{"org.opencontainers.image.title":"vpc-aws-1.0.0.zip"}}],'
        '"annotations":{"org.opencontainers.image.version":"1.0.0"}}'
    )
    assert made.body.decode() == expected
    assert made.digest == _digest(expected)


def test_every_document_is_valid_json_with_schema_version_2() -> None:
    layer = Layer("c" * 64, 1, "x.zip")
    for document in (
        module_manifest(layer, "1.0.0"),
        provider_manifest("linux", "arm64", layer),
        provider_index([], "1.0.0", complete=False),
    ):
        parsed = json.loads(document.body)
        assert parsed["schemaVersion"] == 2
        assert parsed["mediaType"] == document.media_type

"""OpenTofu's OCI client algorithm, written from its documentation and RFC
(website/docs/cli/oci_registries/, rfc/20241206-oci-registries/), step by step,
so the tests hold gitreg to what `tofu init` checks:

Module package (`oci://HOST/REPO?tag=T|digest=D`, `internal/getmodules`):
  resolve the tag (default `latest`) or digest with a manifest HEAD; the
  descriptor must be an image manifest; fetch it (at most 4 MiB, its sha256
  checked), whose mediaType must match and whose artifactType must be
  `application/vnd.opentofu.modulepkg`; select exactly one `archive/zip`
  layer; fetch that blob, check its digest and size, and unpack it.

Provider mirror (`oci_mirror`, `internal/getproviders`):
  list the tags (following `Link` pages), read `_` as `+`, ignore tags that are
  no version; resolve the version's tag, which must be an image index;
  fetch it (checked as above), artifactType `application/vnd.opentofu.provider`;
  select the one descriptor with artifactType
  `application/vnd.opentofu.provider-target`, media type image manifest, a
  platform without os.version and Go's os/architecture; fetch that manifest
  (artifactType provider-target); select exactly one `archive/zip` layer, whose
  digest is the package's `zh:` hash.

Authentication as ORAS does it: a request answered 401 with a Bearer challenge
is retried with a token from the realm, asked with Basic credentials when there
are any.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import ssl
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
MODULE_PACKAGE = "application/vnd.opentofu.modulepkg"
PROVIDER = "application/vnd.opentofu.provider"
PROVIDER_TARGET = "application/vnd.opentofu.provider-target"
MAX_MANIFEST = 4 * 1024 * 1024
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$"
)


class InstallError(Exception):
    """What `tofu init` would fail with."""


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int


@dataclass(frozen=True)
class PackageMeta:
    version: str
    os: str
    arch: str
    zh: str  # the lock file hash the layer digest authenticates
    digest: str
    size: int


class OciClient:
    def __init__(self, host: str, ca_file: str, username: str = "", password: str = "") -> None:
        self.base = f"https://{host}"
        self.http = httpx.Client(verify=ssl.create_default_context(cafile=ca_file), timeout=30)
        self.credentials = (username, password) if password else None
        self.tokens: dict[str, str] = {}  # scope -> bearer token
        self.requests: list[tuple[str, str]] = []

    def close(self) -> None:
        self.http.close()

    # -- transport with the Docker token flow -------------------------------------------

    def request(
        self, method: str, path: str, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        headers = dict(headers or {})
        repository = path.split("/v2/", 1)[1].rsplit("/", 2)[0] if "/v2/" in path else ""
        scope = f"repository:{repository}:pull"
        if scope in self.tokens:
            headers["Authorization"] = f"Bearer {self.tokens[scope]}"
        self.requests.append((method, path))
        answer = self.http.request(method, self.base + path, headers=headers)
        if answer.status_code == 401 and scope not in self.tokens:
            challenge = answer.headers.get("www-authenticate", "")
            if challenge.lower().startswith("bearer "):
                self.tokens[scope] = self._token(challenge[len("bearer ") :], scope)
                return self.request(method, path, headers)
        return answer

    def _token(self, challenge: str, scope: str) -> str:
        params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        query = {"service": params.get("service", ""), "scope": params.get("scope", scope)}
        headers = {}
        if self.credentials:
            raw = f"{self.credentials[0]}:{self.credentials[1]}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(raw).decode()
        answer = self.http.get(params["realm"], params=query, headers=headers)
        if answer.status_code != 200:
            raise InstallError(f"token endpoint answered {answer.status_code}: {answer.text}")
        body = answer.json()
        return str(body.get("token") or body["access_token"])

    # -- the ORAS store operations OpenTofu uses ------------------------------------------

    def resolve(self, repository: str, reference: str) -> Descriptor:
        accept = ", ".join((MANIFEST, INDEX))
        answer = self.request("HEAD", f"/v2/{repository}/manifests/{reference}", {"Accept": accept})
        if answer.status_code != 200:
            raise InstallError(f"resolving {reference}: {answer.status_code}")
        digest = answer.headers["docker-content-digest"]
        if reference.startswith("sha256:") and digest != reference:
            raise InstallError("registry answered another digest than asked for")
        return Descriptor(
            answer.headers["content-type"], digest, int(answer.headers["content-length"])
        )

    def fetch_manifest(self, repository: str, desc: Descriptor) -> dict[str, Any]:
        if desc.size > MAX_MANIFEST:
            raise InstallError("manifest size exceeds OpenTofu's size limit of 4 MiB")
        answer = self.request(
            "GET", f"/v2/{repository}/manifests/{desc.digest}", {"Accept": desc.media_type}
        )
        body = answer.content[: desc.size]
        if "sha256:" + hashlib.sha256(body).hexdigest() != desc.digest:
            raise InstallError(f"manifest content does not match digest {desc.digest}")
        document: dict[str, Any] = json.loads(body)
        return document

    def fetch_blob(self, repository: str, digest: str, size: int) -> bytes:
        answer = self.request("GET", f"/v2/{repository}/blobs/{digest}")
        if answer.status_code != 200:
            raise InstallError(f"blob {digest}: {answer.status_code}")
        data = answer.content
        if len(data) != size or "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            raise InstallError("invalid blob returned from registry")
        return data

    def tags(self, repository: str) -> list[str]:
        found: list[str] = []
        path: str | None = f"/v2/{repository}/tags/list"
        while path:
            answer = self.request("GET", path)
            if answer.status_code == 404:
                codes = [e["code"] for e in answer.json().get("errors", [])]
                if not codes or {"NAME_UNKNOWN", "NAME_INVALID"} & set(codes):
                    raise InstallError("provider not found")
            if answer.status_code != 200:
                raise InstallError(f"listing tags: {answer.status_code}")
            found.extend(answer.json()["tags"])
            link = answer.headers.get("link")
            path = link.split(";", 1)[0].strip("<> ") if link else None
        return found

    # -- modules ---------------------------------------------------------------------------

    def install_module(self, source: str, dest: Path) -> Descriptor:
        """Install `oci://HOST/REPO?tag=|digest=` into `dest`; the layer's descriptor."""
        parts = urlsplit(source)
        if parts.scheme != "oci":
            raise InstallError("oci source type only supports oci URL scheme")
        repository = parts.path.lstrip("/")
        query = parse_qs(parts.query)
        unsupported = set(query) - {"tag", "digest"}
        if unsupported:
            raise InstallError(f"unsupported argument {sorted(unsupported)}")
        if "tag" in query and "digest" in query:
            raise InstallError('cannot set both "tag" and "digest" arguments')
        reference = query.get("digest", query.get("tag", ["latest"]))[0]
        desc = self.resolve(repository, reference)
        if desc.media_type != MANIFEST:
            raise InstallError("selected object is not an OCI image manifest")
        manifest = self.fetch_manifest(repository, desc)
        if manifest.get("mediaType") != desc.media_type:
            raise InstallError(f"unexpected manifest media type {manifest.get('mediaType')!r}")
        if manifest.get("artifactType") != MODULE_PACKAGE:
            raise InstallError(f"unexpected artifact type {manifest.get('artifactType')!r}")
        zips = [layer for layer in manifest["layers"] if layer["mediaType"] == "archive/zip"]
        if len(zips) != 1:
            raise InstallError("image manifest must have exactly one archive/zip layer")
        [layer] = zips
        data = self.fetch_blob(repository, layer["digest"], layer["size"])
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            for name in package.namelist():
                if name.startswith("/") or ".." in name.split("/"):
                    raise InstallError(f"unsafe path {name}")
            package.extractall(dest)
        return Descriptor(layer["mediaType"], layer["digest"], layer["size"])

    # -- providers -------------------------------------------------------------------------

    def available_versions(self, repository: str) -> list[str]:
        versions = [t.replace("_", "+") for t in self.tags(repository)]
        return [v for v in versions if SEMVER.match(v)]

    def package_meta(self, repository: str, version: str, os: str, arch: str) -> PackageMeta:
        desc = self.resolve(repository, version.replace("+", "_"))
        if desc.media_type != INDEX:
            raise InstallError("providers must be selected through a multi-platform index manifest")
        index = self.fetch_manifest(repository, desc)
        if index.get("mediaType") != desc.media_type:
            raise InstallError(f"unexpected manifest media type {index.get('mediaType')!r}")
        if index.get("artifactType") != PROVIDER:
            raise InstallError(f"unexpected artifact type {index.get('artifactType')!r}")
        selected = []
        for entry in index["manifests"]:
            if entry.get("artifactType") != PROVIDER_TARGET:
                continue
            if entry["mediaType"] != MANIFEST:
                raise InstallError("provider image manifest has unsupported media type")
            platform = entry.get("platform")
            if platform is None:
                raise InstallError("provider image manifest lacks the required platform")
            if platform.get("os.version") or (platform["os"], platform["architecture"]) != (
                os,
                arch,
            ):
                continue
            selected.append(entry)
        if len(selected) != 1:
            raise InstallError(f"{len(selected)} manifests for {os}_{arch}")
        [entry] = selected
        manifest_desc = Descriptor(entry["mediaType"], entry["digest"], entry["size"])
        manifest = self.fetch_manifest(repository, manifest_desc)
        if manifest.get("mediaType") != MANIFEST or manifest.get("artifactType") != PROVIDER_TARGET:
            raise InstallError("unexpected platform manifest")
        zips = [layer for layer in manifest["layers"] if layer["mediaType"] == "archive/zip"]
        if len(zips) != 1:
            raise InstallError("image manifest must have exactly one archive/zip layer")
        [layer] = zips
        hex_digest = layer["digest"].removeprefix("sha256:")
        return PackageMeta(version, os, arch, "zh:" + hex_digest, layer["digest"], layer["size"])

    def install_provider(self, repository: str, meta: PackageMeta) -> bytes:
        """The package zip, checked against the hash `package_meta` authenticated."""
        data = self.fetch_blob(repository, meta.digest, meta.size)
        assert "zh:" + hashlib.sha256(data).hexdigest() == meta.zh
        return data

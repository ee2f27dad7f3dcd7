"""Provider release files shaped like goreleaser's `dist/` for terraform providers,
and publisher keys made with pysequoia (the same library gitreg uses).

goreleaser's provider config names files `terraform-provider-TYPE_VERSION_OS_ARCH.zip`,
`..._SHA256SUMS` (sha256sum format, listing the zips and the manifest),
`..._SHA256SUMS.sig` (gpg --detach-sign: binary) and `..._manifest.json`.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pysequoia
import pytest

from gitreg.providers.signing import PublicKeyInfo, generate_key
from gitreg.services import Services, build_services
from gitreg.settings import load_settings

EXECUTABLE_MODE = 0o100755
FIXED_TIME = (2024, 1, 2, 3, 4, 6)


def zip_bytes(
    members: Mapping[str, bytes], mode: int = EXECUTABLE_MODE, create_system: int = 3
) -> bytes:
    """A zip with these members; Unix mode bits as goreleaser sets them."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, FIXED_TIME)
            info.external_attr = mode << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
            info.create_system = create_system
    return out.getvalue()


def provider_zip(type_: str, version: str, binary: bytes) -> bytes:
    return zip_bytes({f"terraform-provider-{type_}_v{version}_x5": binary})


def zip_of_directories(type_: str, version: str, count: int) -> bytes:
    """A provider zip whose executable comes after `count` directory entries."""
    members = {f"d{n}/": b"" for n in range(count)}
    return zip_bytes({**members, f"terraform-provider-{type_}_v{version}_x5": b"x"})


def count_zip_entries_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, the name of every central directory entry zipfile reads."""
    read: list[str] = []

    class Counted(zipfile.ZipInfo):
        __slots__ = ()

        def __init__(self, filename: str = "NoName", *args: Any) -> None:
            super().__init__(filename, *args)
            read.append(filename)

    monkeypatch.setattr(zipfile, "ZipInfo", Counted)
    return read


@functools.cache
def publisher_key(kind: str = "rsa") -> pysequoia.Tsk:
    """A publisher's key, generated once per test session (RSA generation takes seconds)."""
    suite = {
        "rsa": pysequoia.CipherSuite.RSA2k,
        "rsa-other": pysequoia.CipherSuite.RSA2k,
        "ed25519": pysequoia.CipherSuite.Cv25519,
    }[kind]
    return pysequoia.Tsk.generate(
        f"{kind} publisher <{kind}@example.com>",
        profile=pysequoia.Profile.RFC4880,
        cipher_suite=suite,
    )


def public_armor(tsk: pysequoia.Tsk) -> bytes:
    return str(tsk.extract_certificate()).encode()


def key_id(tsk: pysequoia.Tsk) -> str:
    return tsk.extract_certificate().fingerprint.upper()[-16:]


def sign(tsk: pysequoia.Tsk, document: bytes) -> bytes:
    return pysequoia.sign(
        tsk.signer(), document, mode=pysequoia.SignatureMode.DETACHED, armor=False
    )


def shasums(files: Mapping[str, bytes]) -> bytes:
    return "".join(
        f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in sorted(files.items())
    ).encode()


@dataclass
class Dist:
    """One release's files by name; `write(dir)` lays them out like goreleaser's dist/."""

    type: str
    version: str
    files: dict[str, bytes]

    @property
    def shasums_name(self) -> str:
        return f"terraform-provider-{self.type}_{self.version}_SHA256SUMS"

    def zip_name(self, platform: str) -> str:
        return f"terraform-provider-{self.type}_{self.version}_{platform}.zip"

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in self.files.items():
            (directory / name).write_bytes(data)
        return directory

    def resign(self, tsk: pysequoia.Tsk) -> None:
        self.files[self.shasums_name + ".sig"] = sign(tsk, self.files[self.shasums_name])

    def reshasum(self, signer: pysequoia.Tsk | None) -> None:
        listed = {n: d for n, d in self.files.items() if n.endswith(".zip") or n.endswith(".json")}
        self.files[self.shasums_name] = shasums(listed)
        if signer is not None:
            self.resign(signer)


def make_dist(
    type_: str,
    version: str,
    platforms: Sequence[str],
    binary: bytes,
    signer: pysequoia.Tsk | None = None,
    protocols: Sequence[str] | None = ("5.0",),
    with_shasums: bool = True,
) -> Dist:
    """goreleaser's output for a provider: zips, manifest, SHA256SUMS and its signature."""
    dist = Dist(type_, version, {})
    for platform in platforms:
        dist.files[dist.zip_name(platform)] = provider_zip(type_, version, binary)
    if protocols is not None:
        manifest = {"version": 1, "metadata": {"protocol_versions": list(protocols)}}
        dist.files[f"terraform-provider-{type_}_{version}_manifest.json"] = json.dumps(
            manifest
        ).encode()
    if with_shasums:
        dist.reshasum(signer)
    return dist


def make_services(data_dir: Path, **settings: object) -> Services:
    """Real services (SQLite, blob store) on a fresh data dir, for in-process tests."""
    return build_services(load_settings({"data_dir": data_dir, **settings}, environ={}))


@functools.cache
def _generated_rsa() -> tuple[str, PublicKeyInfo]:
    return generate_key("tests provider signing key (gitreg)", 3072)


def reuse_generated_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """RSA generation takes seconds: in-process tests share one generated key."""
    monkeypatch.setattr(
        "gitreg.providers.keys.generate_key", lambda user_id, bits=3072: _generated_rsa()
    )

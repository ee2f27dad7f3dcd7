"""A small upstream provider registry for mirror tests, shaped exactly like the
provider registry protocol (spec: provider-registry-protocol.md), that can be
told to misbehave.

It is a Starlette app; `serve_tls()` runs it under a real uvicorn over TLS on
127.0.0.1 (certificate from gitreg's local CA code) so the mirror's outbound
client does real network I/O: timeouts, truncated bodies and Content-Type are
the server's, not a mock's.

Faults, per version (`upstream.faults[version] = ...`) or for everything
(`upstream.faults["*"]`):

    bad-signature   SHA256SUMS.sig signs other bytes
    sha-mismatch    the signed SHA256SUMS (and shasum) list other bytes than the zip
    html            the zip URL answers 200 text/html (an error page)
    error500        the zip URL answers 500
    truncated       the zip URL declares the full length and sends half
    bad-crc         the zip, signed and listed as it is, has a member whose CRC-32
                    does not match: only unpacking it (the h1 hash) finds out
    tampered        the zip URL sends the signed zip with one byte in its middle
                    changed: right length, wrong bytes (only the sha256 tells)
    down            every request answers 503
    slow            every request waits `slow_seconds` first
    bad-signature+F bad-signature, and the zip URL misbehaves as fault F says

`gate`: while it is a clear `threading.Event`, every zip body stops after its
first half until the event is set (to see what a client gets meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import ssl
import struct
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pysequoia
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from gitreg.server.tls import ensure_local_tls
from tests.support.provider_dist import key_id, provider_zip, public_armor, publisher_key, sign
from tests.support.server import free_port
from tests.support.threaded_server import ThreadedServer


@dataclass
class FakeRelease:
    version: str
    zips: dict[str, bytes]  # platform -> zip
    protocols: tuple[str, ...] = ("5.0",)


@dataclass
class FakeUpstream:
    key: pysequoia.Tsk = field(default_factory=publisher_key)
    providers: dict[tuple[str, str], dict[str, FakeRelease]] = field(default_factory=dict)
    faults: dict[str, str] = field(default_factory=dict)
    slow_seconds: float = 0.0
    requests: list[str] = field(default_factory=list)
    base: str = ""  # https://127.0.0.1:PORT once served
    in_flight: int = 0  # requests inside the `slow` wait right now
    max_in_flight: int = 0
    gate: threading.Event | None = None  # see the module docstring

    def add(
        self,
        namespace: str,
        type_: str,
        versions: list[str],
        platforms: tuple[str, ...] = ("linux_amd64",),
        binary: bytes = b"#!/bin/sh\necho fake provider\n",
        noise: int = 0,
    ) -> None:
        """`noise` appends that many incompressible bytes (for size measurements)."""
        releases = self.providers.setdefault((namespace, type_), {})
        for version in versions:
            payload = binary + random.Random(version).randbytes(noise)
            # Each platform's zip differs, as real builds do.
            zips = {p: provider_zip(type_, version, payload + p.encode()) for p in platforms}
            releases[version] = FakeRelease(version, zips)

    def count(self, fragment: str) -> int:
        return sum(1 for path in self.requests if fragment in path)

    # -- documents ----------------------------------------------------------------------

    def _fault(self, version: str) -> str:
        return self.faults.get(version) or self.faults.get("*", "")

    def _zip(self, release: FakeRelease, platform: str) -> bytes | None:
        data = release.zips.get(platform)
        if data is None or self._fault(release.version) != "bad-crc":
            return data
        corrupt = bytearray(data)
        # End of central directory (no comment): the central directory's offset at
        # +16; its first entry's CRC-32 at +16, which zipfile checks after reading.
        central = struct.unpack("<I", corrupt[-6:-2])[0]
        corrupt[central + 16] ^= 0xFF
        return bytes(corrupt)

    def _shasums(self, type_: str, release: FakeRelease) -> bytes:
        lines = []
        for platform in sorted(release.zips):
            data = self._zip(release, platform) or b""
            if self._fault(release.version) == "sha-mismatch":
                data = data + b"tampered"
            name = f"terraform-provider-{type_}_{release.version}_{platform}.zip"
            lines.append(f"{hashlib.sha256(data).hexdigest()}  {name}\n")
        return "".join(lines).encode()

    def _signature(self, type_: str, release: FakeRelease) -> bytes:
        document = self._shasums(type_, release)
        if "bad-signature" in self._fault(release.version).split("+"):
            document = b"something else\n"
        return sign(self.key, document)

    async def _gated(self, data: bytes) -> AsyncIterator[bytes]:
        yield data[: len(data) // 2]
        while self.gate is not None and not self.gate.is_set():
            await asyncio.sleep(0.01)
        yield data[len(data) // 2 :]

    # -- app ----------------------------------------------------------------------------

    def app(self) -> Starlette:
        async def guard(request: Request) -> Response | None:
            self.requests.append(request.url.path)
            if self.slow_seconds:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    await asyncio.sleep(self.slow_seconds)
                finally:
                    self.in_flight -= 1
            if self.faults.get("*") == "down":
                return JSONResponse({"errors": ["maintenance"]}, status_code=503)
            return None

        async def discovery(request: Request) -> Response:
            return await guard(request) or JSONResponse({"providers.v1": "/v1/providers/"})

        def release_of(request: Request) -> tuple[str, FakeRelease] | None:
            p = request.path_params
            releases = self.providers.get((p["namespace"], p["type"]), {})
            found = releases.get(p["version"]) if "version" in p else None
            return (p["type"], found) if found else None

        async def versions(request: Request) -> Response:
            if (early := await guard(request)) is not None:
                return early
            p = request.path_params
            releases = self.providers.get((p["namespace"], p["type"]))
            if releases is None:
                return JSONResponse({"errors": ["not found"]}, status_code=404)
            listed = [
                {
                    "version": r.version,
                    "protocols": list(r.protocols),
                    "platforms": [
                        {"os": k.split("_")[0], "arch": k.split("_")[1]} for k in sorted(r.zips)
                    ],
                }
                for r in releases.values()
            ]
            return JSONResponse({"versions": listed})

        async def download(request: Request) -> Response:
            if (early := await guard(request)) is not None:
                return early
            found = release_of(request)
            p = request.path_params
            platform = f"{p['os']}_{p['arch']}"
            if found is None or platform not in found[1].zips:
                return JSONResponse({"errors": ["not found"]}, status_code=404)
            type_, release = found
            files = f"/files/{p['namespace']}/{type_}/{release.version}"
            name = f"terraform-provider-{type_}_{release.version}_{platform}.zip"
            shasums = self._shasums(type_, release).decode()
            shasum = next(line.split()[0] for line in shasums.splitlines() if name in line)
            return JSONResponse(
                {
                    "protocols": list(release.protocols),
                    "os": p["os"],
                    "arch": p["arch"],
                    "filename": name,
                    "download_url": f"{files}/{name}",
                    "shasums_url": f"{files}/SHA256SUMS",
                    "shasums_signature_url": f"{files}/SHA256SUMS.sig",
                    "shasum": shasum,
                    "signing_keys": {
                        "gpg_public_keys": [
                            {
                                "key_id": key_id(self.key),
                                "ascii_armor": public_armor(self.key).decode(),
                            }
                        ]
                    },
                }
            )

        async def files(request: Request) -> Response:
            if (early := await guard(request)) is not None:
                return early
            found = release_of(request)
            if found is None:
                return Response(status_code=404)
            type_, release = found
            name = request.path_params["name"]
            if name == "SHA256SUMS":
                return Response(self._shasums(type_, release), media_type="text/plain")
            if name == "SHA256SUMS.sig":
                return Response(self._signature(type_, release), media_type="application/pgp")
            platform = name.removesuffix(".zip").split("_", 2)[-1]
            data = self._zip(release, platform)
            if data is None:
                return Response(status_code=404)
            fault = self._fault(release.version).split("+")[-1]
            if fault == "html":
                return Response(
                    b"<!DOCTYPE html><html>Service error</html>", media_type="text/html"
                )
            if fault == "error500":
                return Response(b"internal error", status_code=500, media_type="text/plain")
            if fault == "truncated":
                return Response(
                    data[: len(data) // 2],
                    media_type="application/zip",
                    headers={"content-length": str(len(data))},
                )
            if fault == "tampered":
                middle = len(data) // 2
                data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
            if self.gate is not None:
                return StreamingResponse(
                    self._gated(data),
                    media_type="application/zip",
                    headers={"content-length": str(len(data))},
                )
            return Response(data, media_type="application/zip")

        return Starlette(
            routes=[
                Route("/.well-known/terraform.json", discovery),
                Route("/v1/providers/{namespace}/{type}/versions", versions),
                Route("/v1/providers/{namespace}/{type}/{version}/download/{os}/{arch}", download),
                Route("/files/{namespace}/{type}/{version}/{name}", files),
            ]
        )


@dataclass
class ServedUpstream:
    upstream: FakeUpstream
    port: int
    ca_pem: Path
    server: uvicorn.Server

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_pem))


@contextlib.contextmanager
def serve_app_tls(app: ASGIApp, tls_dir: Path) -> Iterator[tuple[int, Path, uvicorn.Server]]:
    """Run an ASGI app under uvicorn over TLS (the project's local CA) in a thread
    until the block ends: (port, CA certificate, server)."""
    tls = ensure_local_tls(tls_dir, ["127.0.0.1"])
    port = free_port()
    served = ThreadedServer(app, port, tls.cert, tls.key)
    served.start(f"{type(app).__name__} under uvicorn")
    try:
        yield port, tls.ca_cert, served.server
    finally:
        served.stop()


@contextlib.contextmanager
def serve_tls(upstream: FakeUpstream, tls_dir: Path) -> Iterator[ServedUpstream]:
    """Run the fake under uvicorn over TLS in a thread until the block ends."""
    with serve_app_tls(upstream.app(), tls_dir) as (port, ca_cert, server):
        upstream.base = f"https://127.0.0.1:{port}"
        yield ServedUpstream(upstream, port, ca_cert, server)

"""One upstream package downloaded into the blob store and verified there
(docs/mirror.md, "Verification before anything is kept").

SHA256SUMS and its signature are fetched and verified while the zip downloads
(steps 1-2 of gitreg/mirror/verify.py), and nothing is stored, or sent whole to
a reader of the fill (gitreg/mirror/fill.py), before both passed. The zip
streams straight into the blob writer's temp file, is checked there (steps
3-4), then renamed into place (or uploaded): no copy.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from gitreg.addresses import ProviderAddress
from gitreg.errors import GitregError
from gitreg.mirror.fill import PackageFill
from gitreg.mirror.upstream import DownloadInfo, UpstreamClient
from gitreg.mirror.verify import verify_bytes, verify_checksums, verify_layout
from gitreg.providers.checksums import MAX_SHASUMS_BYTES
from gitreg.providers.package import PackageInfo, PackageLimits
from gitreg.providers.signing import MAX_SIGNATURE_BYTES
from gitreg.providers.zipstream import StreamedMembers
from gitreg.storage.blobs import BlobStore, BlobWriter, StoredBlob

if TYPE_CHECKING:
    import httpx  # imported on a first upstream request (gitreg/upstream/client.py)


class PackageFetcher:
    def __init__(
        self, upstream: UpstreamClient, blobs: BlobStore, limits: PackageLimits, max_bytes: int
    ) -> None:
        self.upstream = upstream
        self.blobs = blobs
        self.limits = limits
        self.max_bytes = max_bytes

    async def fetch(
        self, address: ProviderAddress, info: DownloadInfo, what: str, fill: PackageFill
    ) -> tuple[str, PackageInfo]:
        """(signer's key ID, the verified zip's hashes), the zip stored."""
        checks = asyncio.ensure_future(self._checksums(address, info, what))
        try:
            return await self._download_verified(address, info, checks, what, fill)
        finally:
            checks.cancel()  # a no-op once it finished

    async def _checksums(
        self, address: ProviderAddress, info: DownloadInfo, what: str
    ) -> tuple[str, str]:
        """(signer's key ID, the zip's expected sha256): verification steps 1-2."""
        shasums, signature = await asyncio.gather(
            self.upstream.fetch_small(info.shasums_url, f"SHA256SUMS of {what}", MAX_SHASUMS_BYTES),
            self.upstream.fetch_small(
                info.shasums_signature_url, f"SHA256SUMS signature of {what}", MAX_SIGNATURE_BYTES
            ),
        )
        return await anyio.to_thread.run_sync(verify_checksums, address, info, shasums, signature)

    async def _download_verified(
        self,
        address: ProviderAddress,
        info: DownloadInfo,
        checks: asyncio.Future[tuple[str, str]],
        what: str,
        fill: PackageFill,
    ) -> tuple[str, PackageInfo]:
        """The zip streamed straight into a blob writer's temp file (sha256 hashed on
        the way), checked there once `checks` (steps 1-2) passed, then renamed into
        the store (or uploaded): no copy. Once its sha256 is the signed one the
        fill's readers may send its last bytes; the layout and `h1:` (one more read
        of the file, unless `fill` hashes while the bytes arrive) come after that,
        off their clients' path. A body that fails any check, or breaks off, leaves
        nothing stored; a failed `checks` abandons the download and is the
        error reported."""
        found = {"content-type": "", "expected": ""}
        verified: list[PackageInfo] = []
        members = None
        if fill.hash_while_arriving:
            members = StreamedMembers(self.limits.max_unpacked_bytes, self.limits.max_files)

        def check(path: Path, blob: StoredBlob) -> None:
            expected, content_type = found["expected"], found["content-type"]
            verify_bytes(address, info, path, blob.sha256, expected, content_type)
            fill.verified_threadsafe()
            verified.append(verify_layout(address, info, path, blob.sha256, self.limits, members))

        manager = self.blobs.writer(check)
        sink = manager.__enter__()  # creates an empty temp file: quick enough for the loop
        fill.attach(sink.reader_fd())  # readers stream from it as it fills
        fetch = self._fetch_zip(info, what, _Tee(sink, members), fill, checks)
        try:
            try:
                headers = await fetch
            except (asyncio.CancelledError, GitregError):
                if fetch.cancelled() and not checks.done():
                    raise  # this request itself was cancelled
                await checks  # a failed signature or SHA256SUMS is the error to report
                raise
            key_id, found["expected"] = await checks
        except BaseException as exc:
            # Closing and removing the temp file (up to the package cap) is file work:
            # a thread's, shielded so a fill cancelled meanwhile still leaves none.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(manager.__exit__, type(exc), exc, exc.__traceback__)
            raise
        found["content-type"] = headers.get("content-type", "")
        # Verification (unzipping for h1), fsync and rename block: a thread does them.
        await anyio.to_thread.run_sync(manager.__exit__, None, None, None)
        return key_id, verified[0]

    def _fetch_zip(
        self,
        info: DownloadInfo,
        what: str,
        sink: _Tee,
        fill: PackageFill,
        checks: asyncio.Future[tuple[str, str]],
    ) -> asyncio.Future[httpx.Headers]:
        """The zip's download into `sink`, abandoned when `checks` fail; readers of
        `fill` may start once they pass (gitreg/mirror/fill.py)."""
        fetch = asyncio.ensure_future(
            self.upstream.fetch_to(
                info.download_url,
                f"package {what}",
                self.max_bytes,
                sink,
                fill.moved,
            )
        )

        def abandon(done: asyncio.Future[tuple[str, str]]) -> None:
            if done.cancelled():
                return
            if done.exception() is not None:
                fetch.cancel()  # the signature or SHA256SUMS failed: the zip is useless
            else:
                fill.checked(done.result()[1])

        checks.add_done_callback(abandon)
        return fetch


class _Tee:
    """The zip's bytes into the blob writer (sha256 on the way) and, for a fill
    that hashes while the bytes arrive, to the member hashes for `h1:`
    (gitreg/providers/zipstream.py), on the upstream client's writer thread."""

    def __init__(self, sink: BlobWriter, members: StreamedMembers | None) -> None:
        self._sink = sink
        self._members = members

    def write(self, data: bytes, /) -> int:
        written = self._sink.write(data)
        if self._members is not None:
            self._members.feed(data)
        return written

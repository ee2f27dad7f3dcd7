"""A hosted blob is opened and fstat'ed in one thread-pool trip and the response
reads that descriptor (gitreg/api/blob_file.py, `OpenBlob`), in process through
the whole app. The trip count and the 503 are behaviour (each fails with a stat
followed by an open); the descriptor counts are guards: whatever way an answer ends,
no descriptor of a blob stays open.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import random
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from starlette.applications import Starlette
from starlette.types import Message

from gitreg.api import blob_file
from gitreg.api.blob_file import PIECE, BlobFileResponse, OpenBlob
from gitreg.app import create_app
from gitreg.services import Services
from gitreg.settings import load_settings

SMALL = random.Random(7).randbytes(10_000)
LARGE = random.Random(8).randbytes(16 * PIECE + 5)

Send = Callable[[Message], Awaitable[None]]
Receive = Callable[[], Awaitable[Message]]


class SendFailed(Exception):
    """A server's `send` failing under the response, whatever the reason."""


def blob_fds(root: Path) -> list[str]:
    """This process's open descriptors of files under the blob store's root."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the listing's own descriptor, closed meanwhile
            continue
        if target.startswith(str(root / "sha256")):
            found.append(target)
    return found


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[Starlette, dict[str, str], Path]]:
    """The app, the names of SMALL and LARGE, and the blob store's root."""
    app = create_app(load_settings({"data_dir": tmp_path / "data"}, environ={}))
    svc: Services = app.state.services
    names = {
        "small": svc.blobs.put_bytes(SMALL).sha256,
        "large": svc.blobs.put_bytes(LARGE).sha256,
    }
    yield app, names, tmp_path / "data" / "blobs"


@asynccontextmanager
async def running(app: Starlette) -> AsyncIterator[None]:
    async with app.router.lifespan_context(app):
        yield


def scope(method: str, sha256: str, headers: list[tuple[bytes, bytes]] | None = None) -> Any:
    path = f"/archives/{sha256}.tar.gz"
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "https",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), *(headers or [])],
        "server": ("127.0.0.1", 8443),
        "client": ("127.0.0.1", 50000),
        "state": {},
    }


async def connected() -> Message:
    await anyio.sleep_forever()  # the client stays until the answer ends
    raise AssertionError


async def ask(
    app: Starlette, method: str, sha256: str, headers: list[tuple[bytes, bytes]] | None = None
) -> tuple[int, dict[bytes, bytes], bytes]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope(method, sha256, headers), connected, send)
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], dict(start["headers"]), body


def test_a_download_makes_one_thread_pool_trip(
    app: tuple[Starlette, dict[str, str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Open and fstat together: a stat, then an open in the response, would make two."""
    # Whatever an earlier test's file system made of the process-wide switch.
    monkeypatch.setattr(blob_file, "_nowait", [blob_file._NOWAIT])
    if not blob_file._NOWAIT:
        pytest.skip("no RWF_NOWAIT: every piece is a thread-pool read here")
    application, names, _ = app
    trips: list[object] = []
    real = anyio.to_thread.run_sync

    async def counted(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        trips.append(func)
        return await real(func, *args, **kwargs)

    async def main() -> dict[str, int]:
        async with running(application):
            await ask(application, "GET", names["small"])  # the access snapshot, once
            monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
            counts = {}
            etag = f'"{names["small"]}"'.encode()
            for label, method, headers in (
                ("GET", "GET", []),
                ("HEAD", "HEAD", []),
                ("304", "GET", [(b"if-none-match", etag)]),
            ):
                trips.clear()
                status, _, body = await ask(application, method, names["small"], headers)
                assert status == {"304": 304}.get(label, 200)
                assert body == (SMALL if label == "GET" else b"")
                counts[label] = len(trips)
            return counts

    assert asyncio.run(main()) == {"GET": 1, "HEAD": 1, "304": 1}


def test_every_kind_of_answer_keeps_its_headers_and_closes_the_file(
    app: tuple[Starlette, dict[str, str], Path],
) -> None:
    application, names, root = app
    small, size = names["small"], str(len(SMALL)).encode()
    etag = f'"{small}"'.encode()
    cases: list[tuple[str, list[tuple[bytes, bytes]], int, bytes | None]] = [
        ("GET", [], 200, SMALL),
        ("GET", [(b"range", b"bytes=1-10")], 206, SMALL[1:11]),
        ("GET", [(b"range", b"bytes=0-1,5-6")], 206, None),
        ("HEAD", [], 200, b""),
        ("GET", [(b"if-none-match", etag)], 304, b""),
        ("GET", [(b"range", b"bytes=999999-")], 416, None),
        ("GET", [(b"range", b"bytes=x")], 400, None),
    ]

    async def main() -> None:
        async with running(application):
            for _ in range(20):
                for method, headers, want, body in cases:
                    status, answer, got = await ask(application, method, small, headers)
                    assert status == want, (method, headers)
                    if body is not None:
                        assert got == body
                    if want in (200, 206, 304):
                        assert answer[b"etag"] == etag
                        assert answer[b"cache-control"].endswith(b"immutable")
                    if want == 200:
                        assert answer[b"content-length"] == size
                    assert blob_fds(root) == []
            status, _, got = await ask(application, "GET", "ab" * 32)
            assert status == 404 and json.loads(got) == {"errors": ["no such archive"]}

    asyncio.run(main())


def test_a_client_gone_before_or_during_the_body_leaves_nothing_open(
    app: tuple[Starlette, dict[str, str], Path],
) -> None:
    application, names, root = app

    async def gone_at(pieces: int) -> int:
        """Answer a GET of LARGE to a client that leaves after `pieces` body pieces."""
        left = anyio.Event()
        got = 0

        async def send(message: Message) -> None:
            nonlocal got
            if message["type"] == "http.response.body":
                got += 1
                if got >= pieces:
                    left.set()
                await anyio.sleep(0)  # a socket write gives the loop a turn

        async def receive() -> Message:
            if pieces:
                await left.wait()
            return {"type": "http.disconnect"}

        await application(scope("GET", names["large"]), receive, send)
        return got

    async def main() -> None:
        async with running(application):
            for pieces in (0, 1, 3) * 10:
                got = await gone_at(pieces)
                assert got < 17  # cut short: LARGE is 17 pieces
                assert blob_fds(root) == []

    asyncio.run(main())


def test_a_failed_send_or_a_cancellation_leaves_nothing_open(
    app: tuple[Starlette, dict[str, str], Path],
) -> None:
    application, names, root = app

    async def send_fails(message: Message) -> None:
        if message["type"] == "http.response.body":
            raise SendFailed

    async def send_slowly(message: Message) -> None:
        await anyio.sleep(0.01)

    async def main() -> None:
        async with running(application):
            for _ in range(10):
                with pytest.raises(SendFailed):
                    await application(scope("GET", names["large"]), connected, send_fails)
                assert blob_fds(root) == []
                with anyio.move_on_after(0.03):  # an anyio cancellation mid-body
                    await application(scope("GET", names["large"]), connected, send_slowly)
                assert blob_fds(root) == []
                task = asyncio.ensure_future(  # asyncio's own, as at server shutdown
                    application(scope("GET", names["large"]), connected, send_slowly)
                )
                await asyncio.sleep(0.03)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert blob_fds(root) == []

    asyncio.run(main())


def test_a_cancellation_during_the_open_trip_closes_what_the_thread_opened(
    app: tuple[Starlette, dict[str, str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """asyncio's `task.cancel()` does not wait for the worker thread: the thread
    then finds its opener gone and closes the descriptor itself."""
    application, names, root = app
    opening, release = threading.Event(), threading.Event()
    real_open = os.open

    def slow_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        fd = real_open(path, flags, *args, **kwargs)
        if str(path).startswith(str(root / "sha256")):
            opening.set()
            release.wait(10)
        return fd

    async def main() -> None:
        async with running(application):
            monkeypatch.setattr(os, "open", slow_open)
            task = asyncio.ensure_future(ask(application, "GET", names["small"]))
            await asyncio.to_thread(opening.wait, 10)
            assert len(blob_fds(root)) == 1  # open on the worker thread
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            release.set()
            for _ in range(200):  # the thread finishes on its own time
                if not blob_fds(root):
                    break
                await asyncio.sleep(0.01)
            assert blob_fds(root) == []

    asyncio.run(main())


def test_a_failed_open_is_a_503_with_retry_after(
    app: tuple[Starlette, dict[str, str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of descriptors (EMFILE) is met before any byte went out now, so it is
    answered as JSON, not a 500."""
    application, names, root = app
    real_open = os.open

    def no_descriptors(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(path).startswith(str(root / "sha256")):
            raise OSError(errno.EMFILE, "Too many open files")
        return real_open(path, flags, *args, **kwargs)

    async def main() -> tuple[int, dict[bytes, bytes], bytes]:
        async with running(application):
            monkeypatch.setattr(os, "open", no_descriptors)
            return await ask(application, "GET", names["small"])

    status, headers, body = asyncio.run(main())
    assert status == 503 and headers[b"retry-after"] == b"5"
    assert json.loads(body)["errors"][0].startswith(f"cannot open blob {names['small']}")


def test_a_response_dropped_unsent_closes_its_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "sha256" / "blob"
    path.parent.mkdir()
    path.write_bytes(SMALL)
    opened = OpenBlob(str(path))
    # Opened here, not on a worker thread: a thread of anyio's pool can keep its
    # last call (and so this object) referenced for a while after it returned.
    stat = opened._open_and_stat()
    response = BlobFileResponse(opened, stat)
    assert len(blob_fds(tmp_path)) == 1
    del opened
    with pytest.warns(ResourceWarning, match="unclosed blob descriptor"):
        del response
    assert blob_fds(tmp_path) == []

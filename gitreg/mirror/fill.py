"""One package being pulled through, readable while it arrives.

A cold miss of a zip is answered while the zip downloads rather than once it
is verified and stored, so its client does not wait for the download and the
checks one after the other (docs/mirror.md, docs/performance.md). The requests
that want it read the blob writer's temp file as the bytes land in it, under
three rules that keep anything unverified from being handed out whole:

- nothing is sent before SHA256SUMS and its signature verified (steps 1-2 of
  gitreg/mirror/verify.py), so the expected sha256 is known and a bad signature
  is still an ordinary JSON error (502) rather than a cut-off body;
- the last `TAIL` bytes written so far are held back until the whole file's
  sha256 matched the signed SHA256SUMS (`verified`): a mismatch ends the fill
  with an error, the readers cut their connections short of the last piece,
  and a client sees a truncated body, never a complete wrong zip. The zip
  layout and `h1:` are checked after the tail went out, before anything is
  stored: those bytes are exactly the ones the origin's signature covers, the
  ones Terraform would have installed from the origin itself, and `h1:` is
  only needed for VERSION.json (docs/mirror.md, "Cold VERSION.json");
- the fill belongs to no request: a client that goes away closes only its own
  read descriptor, and the fill goes on for the others (and the store).

Every request arriving while the fill runs joins it (reads the same temp file
from its start); one arriving after it ended is served from the store. Readers
hold one piece at a time, never the zip, whatever its size. A cold VERSION.json
waits only for `ready()`: the signed sha256 is known and the zip is arriving.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Coroutine, Iterator
from typing import Any

from gitreg.errors import UpstreamError
from gitreg.mirror.store import MirrorPackage
from gitreg.mirror.upstream import Progress

# Bytes held back from readers until the fill is verified and stored: a piece,
# which is also at least the zip's end of central directory (22 bytes), so even
# a reader that kept everything cannot open a partial zip as a whole one.
TAIL = 64 * 1024


class PackageFill:
    """The state readers need of one fill: its bytes so far and how it ended."""

    def __init__(self, progress: Progress | None = None) -> None:
        self._progress = progress
        # A fill with a progress report is `gitreg mirror sync`'s, in a process no
        # client can join: it takes `h1:` while the bytes arrive, overlapping the
        # network. A fill a client may be reading takes it once the bytes went out.
        self.hash_while_arriving = progress is not None
        self._loop = asyncio.get_running_loop()
        self.task: asyncio.Future[MirrorPackage] | None = None
        self.expected = ""  # the zip's sha256 from the verified SHA256SUMS, once known
        self.size: int | None = None  # the upstream's Content-Length, if it sent one
        self.written = 0  # bytes in the temp file (each write finished)
        self._fd: int | None = None  # the fill's own descriptor of the temp file
        self._arrived = False
        self._verified = False  # the whole file's sha256 is the signed one
        self.readers = 0  # requests streaming the bytes now (`reading`)
        self._ready: asyncio.Future[None] = self._loop.create_future()
        self._changed = asyncio.Event()

    def start(self, fill: Coroutine[Any, Any, MirrorPackage]) -> asyncio.Future[MirrorPackage]:
        self.task = asyncio.ensure_future(fill)
        self.task.add_done_callback(self._finished)
        return self.task

    def running(self) -> bool:
        """Still running, in this event loop (a command may run several loops)."""
        task = self.task
        return (
            task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop()
        )

    # -- the fill's side (gitreg/mirror/service.py) ---------------------------------------

    def attach(self, fd: int) -> None:
        """The temp file the zip is written to, as a descriptor this fill owns."""
        self._fd = fd

    def checked(self, expected: str) -> None:
        """SHA256SUMS and its signature verified: `expected` is the zip's sha256."""
        self.expected = expected
        self._signal()

    def verified_threadsafe(self) -> None:
        """From the blob writer's check, on its thread: every byte is written and
        their sha256 is the signed one; readers may send the held-back tail."""
        with contextlib.suppress(RuntimeError):  # its loop closed: no reader is left
            self._loop.call_soon_threadsafe(self._verify)

    @property
    def verified(self) -> bool:
        """The bytes are the signed ones, and readers may have sent them all."""
        return self._verified

    def _verify(self) -> None:
        self._verified = True
        self._signal()

    def moved(self, received: int, declared: int | None) -> None:
        """A piece was written (the upstream client's progress callback)."""
        self.written, self.size, self._arrived = received, declared, True
        if self._progress is not None:
            self._progress(received, declared)
        self._signal()

    def unreported(self) -> bool:
        """Whether a failure of this fill now would reach no log line unless the
        service writes one: the zip had begun arriving (before that, its error is
        what the waiting requests answer, and a cold VERSION.json logs it), no
        reader is streaming it (each one cuts its client off with a line saying
        why: gitreg/mirror/http_stream.py), and it is not `gitreg mirror sync`'s
        (whose command prints every failure)."""
        began = (
            self._ready.done() and not self._ready.cancelled() and self._ready.exception() is None
        )  # `ready()` passed: bytes may be on their way to clients
        return began and self.readers == 0 and self._progress is None

    def _signal(self) -> None:
        if self.expected and self._arrived and not self._ready.done():
            self._ready.set_result(None)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()  # wakes every reader waiting on the old event

    def _finished(self, task: asyncio.Future[MirrorPackage]) -> None:
        if self._fd is not None:
            os.close(self._fd)  # readers hold their own duplicates
            self._fd = None
        if not self._ready.done():
            if task.cancelled():
                self._ready.cancel()
            elif (error := task.exception()) is not None:
                self._ready.set_exception(error)
            else:
                self.expected = self.expected or task.result().sha256
                self._ready.set_result(None)
        # Retrieved here, so neither warns "never retrieved" when no one awaits them:
        # a fill a cold VERSION.json started, or one whose readers had every byte,
        # fails after `_ready`; the error is remembered (service.py `_failed`).
        if not task.cancelled():
            task.exception()
        if self._ready.done() and not self._ready.cancelled():
            self._ready.exception()
        self._signal()

    # -- the readers' side (gitreg/mirror/http_stream.py) ----------------------------------

    async def ready(self) -> None:
        """Wait until bytes may be sent (checks 1-2 passed, the zip is arriving), or
        the fill ended; raises the fill's error if it failed before that."""
        await asyncio.shield(self._ready)

    async def result(self) -> MirrorPackage:
        assert self.task is not None
        return await asyncio.shield(self.task)

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Around one reader's streaming: while it lasts, a failure of the fill is
        that reader's to report (`servable` raises it), not the service's."""
        self.readers += 1
        try:
            yield
        finally:
            self.readers -= 1

    def open_reader(self) -> int | None:
        """A new descriptor of the temp file for one reader, who closes it; None
        once the fill ended (read the stored blob then)."""
        if self._fd is None or self.task is None or self.task.done():
            return None
        return os.dup(self._fd)

    async def servable(self, offset: int) -> int:
        """How far a reader at `offset` may read now: waits while nothing more is
        allowed. The whole length once the bytes are verified (or the fill
        succeeded); raises its error when it failed before that, so the reader
        cuts its client off short of the tail."""
        assert self.task is not None
        while True:
            if self._verified:
                return self.written
            if self.task.done():
                if self.task.cancelled():  # the server is stopping
                    raise UpstreamError("the fill of this package was stopped")
                self.task.result()
                return self.written
            end = self.written - TAIL
            if end > offset:
                return end
            await self._changed.wait()

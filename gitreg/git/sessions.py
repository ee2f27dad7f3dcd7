"""Keeping a mirror open for the length of a sync.

Opening a mirror with dulwich (refs, pack indexes, caches) costs milliseconds, and a
sync of a monorepo reads it for every version it publishes (docs/performance.md,
"Publishing at scale"): its subtree, its archive, its documentation
(gitreg/catalog). `MirrorSessions.session` keeps one `Repo` open on the calling
thread until the sync ends, and every read on that thread uses it; other threads
(the server's other job threads) open their own.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dulwich.repo import Repo


class MirrorSessions:
    """Open mirrors per thread. Picklable (empty) for archive worker processes."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _open(self) -> dict[Path, Repo]:
        if not hasattr(self._local, "open"):
            self._local.open = {}
        found: dict[Path, Repo] = self._local.open
        return found

    @contextlib.contextmanager
    def session(self, mirror: Path, opener: Callable[[Path], Repo]) -> Iterator[None]:
        """Reads of `mirror` on this thread share one open repository until the end."""
        if mirror in self._open():
            yield  # already in a session of this mirror
            return
        repo = opener(mirror)
        self._open()[mirror] = repo
        try:
            yield
        finally:
            del self._open()[mirror]
            repo.close()

    @contextlib.contextmanager
    def reading(self, mirror: Path, opener: Callable[[Path], Repo]) -> Iterator[Repo]:
        """The session's repository, or one opened and closed for this read alone."""
        repo = self._open().get(mirror)
        if repo is not None:
            yield repo
            return
        repo = opener(mirror)
        try:
            yield repo
        finally:
            repo.close()

    def __getstate__(self) -> dict[str, Any]:
        return {}  # open repositories stay with their process

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._local = threading.local()

"""Cross-process locks on files in the data dir.

Several processes share one data dir (the server, CLI commands, more workers);
`flock` makes them take turns on one repository's mirror and publishing, and
the kernel drops the lock if a holder is killed, so a crash never wedges it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)

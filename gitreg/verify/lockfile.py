"""`modules.lock.json`: what `gitreg verify` saw, meant to be committed like
`.terraform.lock.hcl`.

    {
      "version": 1,
      "modules": {
        "<module key>": {"source": ..., "version": ..., "dirHash": "h1:...",
                         "keyid": ..., "logIndex": N}
      },
      "registries": {
        "<host>": {"checkpoint": {"origin": ..., "size": N, "root": "<base64>"}}
      }
    }

Written with sorted keys and two-space indents, so a change shows as a small
diff in review.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitreg.errors import BadRequest, GitregError

LOCK_NAME = "modules.lock.json"
FORMAT = 1


@dataclass(frozen=True)
class Locked:
    source: str
    version: str
    dir_hash: str
    keyid: str
    log_index: int


@dataclass(frozen=True)
class LockedCheckpoint:
    origin: str
    size: int
    root: str  # base64


@dataclass
class LockFile:
    modules: dict[str, Locked] = field(default_factory=dict)
    checkpoints: dict[str, LockedCheckpoint] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        return {
            "version": FORMAT,
            "modules": {
                key: {
                    "source": m.source,
                    "version": m.version,
                    "dirHash": m.dir_hash,
                    "keyid": m.keyid,
                    "logIndex": m.log_index,
                }
                for key, m in sorted(self.modules.items())
            },
            "registries": {
                host: {"checkpoint": {"origin": c.origin, "size": c.size, "root": c.root}}
                for host, c in sorted(self.checkpoints.items())
            },
        }


def read_lock(path: Path) -> LockFile:
    """The lock file, or an empty one when there is none; BadRequest for one
    that cannot be read as a lock file."""
    try:
        # Non-blocking, so a fifo in its place is refused rather than waited on.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return LockFile()
    except OSError as exc:
        raise BadRequest(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise BadRequest(f"cannot read {path}: not a regular file")
            document = json.loads(file.read().decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise BadRequest(f"cannot read {path}: {exc}"[:300]) from None
    try:
        if document.get("version") != FORMAT:
            raise ValueError(f"unknown format version {document.get('version')!r}")
        modules = {
            str(key): Locked(
                str(m["source"]),
                str(m["version"]),
                str(m["dirHash"]),
                str(m["keyid"]),
                int(m["logIndex"]),
            )
            for key, m in document.get("modules", {}).items()
        }
        checkpoints = {
            str(host): LockedCheckpoint(
                str(r["checkpoint"]["origin"]),
                int(r["checkpoint"]["size"]),
                _root(r["checkpoint"]["root"]),
            )
            for host, r in document.get("registries", {}).items()
        }
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise BadRequest(f"{path} is not a modules lock file: {exc}") from None
    return LockFile(modules, checkpoints)


def _root(value: object) -> str:
    """A checkpoint's root hash as recorded: base64 of 32 bytes (SHA-256)."""
    text = str(value)
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise ValueError(f"checkpoint root {text[:60]!r} is not the base64 of a SHA-256 hash")
    return text


def write_lock(path: Path, lock: LockFile) -> None:
    """Replace the lock file atomically: the whole new file, or the old one
    untouched and no temporary file left. A write that fails (a read-only
    directory, a full disk) raises GitregError naming the file."""
    text = json.dumps(lock.document(), indent=2, sort_keys=True) + "\n"
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".modules.lock.")
    except OSError as exc:
        raise _unwritable(path, exc) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _unwritable(path, exc) from None
        raise


def _unwritable(path: Path, exc: OSError) -> GitregError:
    return GitregError(f"cannot write {path}: {exc.strerror or exc}")

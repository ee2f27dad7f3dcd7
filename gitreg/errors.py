"""The one exception tree of gitreg.

Domain code raises these; `gitreg.app` turns any of them into a JSON body
`{"errors": ["..."]}` with the status below, and the CLI prints the message and
exits non-zero. Nothing raised for bad input should ever reach a 500.

    GitregError (500)
    ├── BadRequest (400)        malformed address, version, platform or body
    │   └── PayloadTooLarge (413)
    ├── Unauthorized (401)      no or unknown credentials
    ├── Forbidden (403)         credentials without the needed scope
    ├── TooManyRequests (429)   too many failed authentications from one client
    ├── StorageFull (503)       the disk or the index is full (ENOSPC, SQLITE_FULL)
    ├── NotFound (404)          unknown module, version, blob or route
    ├── Conflict (409)          an immutable thing would change
    ├── ConfigError (500)       settings that cannot work; raised at start-up
    ├── GitError (502)          fetching from a remote failed
    ├── UpstreamError (502)     an upstream registry failed or sent a package that
    │   │                       fails verification (mirror)
    │   └── UpstreamTimeout (504)
    └── PublishError (422)      a tag or tree cannot become a version
"""

from __future__ import annotations

import errno
import sqlite3


class GitregError(Exception):
    """Base class: anything gitreg raises on purpose."""

    status = 500


class BadRequest(GitregError):
    """The request or command-line input is malformed."""

    status = 400


class PayloadTooLarge(BadRequest):
    """A request body is over its size cap (checked before parsing)."""

    status = 413


class Unauthorized(GitregError):
    """Credentials are missing or unknown."""

    status = 401


class Forbidden(GitregError):
    """Credentials are valid but do not allow this action."""

    status = 403


class TooManyRequests(GitregError):
    """A client failed authentication too often; `retry_after` says for how long."""

    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StorageFull(GitregError):
    """The data dir's filesystem (or a quota on it) is full. Nothing was half
    written (writes are atomic), so the same request can simply be retried
    once space is freed; `retry_after` says when to try again."""

    status = 503

    def __init__(self, where: str, retry_after: int = 60) -> None:
        super().__init__(f"storage is full: {where}; free space and retry")
        self.retry_after = retry_after


# ENOSPC: no space left; EDQUOT: a disk quota reached. Both are the same
# "free space and retry" to the operator.
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_storage_full(exc: BaseException) -> bool:
    """True for OSError ENOSPC/EDQUOT and SQLite's "database or disk is full"."""
    if isinstance(exc, OSError):
        return exc.errno in _FULL_ERRNOS
    if isinstance(exc, sqlite3.Error):
        return "database or disk is full" in str(exc) or (
            getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
        )
    return False


def storage_full(exc: BaseException, where: str) -> StorageFull | None:
    """The `StorageFull` to raise instead of `exc`, or None if it is another error."""
    return StorageFull(f"{where} ({_reason(exc)})") if is_storage_full(exc) else None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc)


class NotFound(GitregError):
    """The addressed module, version, artifact or route does not exist."""

    status = 404


class Conflict(GitregError):
    """The action would change something published, which is immutable."""

    status = 409


class ConfigError(GitregError):
    """Settings that cannot work (bad flag, unreadable config file)."""

    status = 500


class GitError(GitregError):
    """A git remote could not be reached or read."""

    status = 502


class UpstreamError(GitregError):
    """An upstream registry was unreachable, answered badly, or sent a package
    that failed verification; nothing of it was cached (mirror, checklist M1)."""

    status = 502


class UpstreamTimeout(UpstreamError):
    """An upstream registry did not answer within the mirror's timeouts."""

    status = 504


class PublishError(GitregError):
    """A tag or tree cannot be published (too large, missing subdirectory)."""

    status = 422

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

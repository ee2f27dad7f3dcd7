"""The one exception tree of gitreg: every exception gitreg raises on purpose.

Domain code raises these; `gitreg.app` turns any of them into a JSON body
`{"errors": ["..."]}` with the status below, and the CLI prints the message and
exits 2 for a `BadRequest` (or a refused Terraform configuration, or an unknown
setting), 1 for any other (`gitreg.cli.main`). Nothing raised for bad input should
ever reach a 500. The storage engines' own errors (sqlite3, psycopg, the S3 client)
become the storage errors below inside gitreg/storage/, and nowhere else.

    GitregError (500)
    ├── BadRequest (400)            malformed address, version, platform or body
    │   ├── PayloadTooLarge (413)
    │   └── ConstraintError (400)   a version or constraint Terraform would refuse
    │       └── NotAVersion (400)   a text that is not a semantic version
    ├── Unauthorized (401)          no or unknown credentials
    ├── Forbidden (403)             credentials without the needed scope
    ├── RequestTimeout (408)        a request body that did not arrive in time
    ├── TooManyRequests (429)       too many failed authentications from one client
    ├── StorageFull (503)           the disk, the index or the database is full
    ├── DatabaseUnavailable (503)   the index (PostgreSQL, or the SQLite file) cannot
    │                               be reached, opened or locked in time
    ├── QueueUnavailable (503)      webhook deliveries could not be stored
    ├── StorageUnavailable (503)    the blob store (S3) failed or could not be reached
    ├── BlobMissing (503)           a blob the index names is not in the blob store
    ├── IssuerUnavailable (503)     a workload identity issuer's keys cannot be fetched
    ├── NotFound (404)              unknown module, version, blob or route
    │   ├── UpstreamNotFound (404)  the upstream registry has no such thing (mirror)
    │   └── UnknownReference (404)  an OCI repository without that manifest or blob
    ├── Conflict (409)              an immutable thing would change
    ├── ConfigError (500)           settings that cannot work; raised at start-up
    │                               (400: an unknown setting, or a Terraform
    │                               configuration to mirror)
    ├── RemoteError (502)           the registry a CLI upload talks to refused it
    ├── GitError (502)              fetching from a remote failed
    │   ├── MirrorLocked (502)      a lock file left in a repository's git mirror
    │   └── ForgeError (502)        a forge's release API failed
    │       └── ReleasePending (502)  a release still uploading its assets
    ├── UpstreamError (502)         an upstream registry failed (mirror)
    │   ├── UpstreamTimeout (504)
    │   └── VerificationError (502) an upstream package failed verification
    └── PublishError (422)          a tag, tree or release cannot become a version
        ├── ArchiveTooLarge (422)   a module tree over the archive limits
        ├── PackageError (422)      a provider zip Terraform could not install
        ├── SignatureError (422)    a SHA256SUMS signature missing or not verifying
        ├── IncompleteRelease (422) SHA256SUMS lists packages not given
        └── ChecksumMismatch (422)  a package differs from its SHA256SUMS line
"""

from __future__ import annotations

import errno
import logging


class GitregError(Exception):
    """Base class: anything gitreg raises on purpose."""

    status = 500

    def public_message(self) -> str:
        """What an HTTP client is told; the message itself by default."""
        return str(self)


class BadRequest(GitregError):
    """The request or command-line input is malformed."""

    status = 400


class PayloadTooLarge(BadRequest):
    """A request body is over its size cap (checked before parsing)."""

    status = 413


class ConstraintError(BadRequest):
    """A version or version constraint Terraform itself would refuse; the message says why."""


class NotAVersion(ConstraintError):
    """The text (a tag, a path part, an upstream entry) is not a semantic version."""


class Unauthorized(GitregError):
    """Credentials are missing or unknown."""

    status = 401


class Forbidden(GitregError):
    """Credentials are valid but do not allow this action."""

    status = 403


class RequestTimeout(GitregError):
    """A client sent its request body too slowly (gitreg/api/body_deadline.py);
    the connection is closed after the answer."""

    status = 408


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


class DatabaseUnavailable(GitregError):
    """The index cannot be reached or refused the transaction: PostgreSQL down
    or unreachable, or an SQLite file that cannot be opened, read or locked in
    time. Nothing was committed, so the request can be retried; cached
    metadata keeps being served meanwhile."""

    status = 503

    def __init__(self, detail: str, retry_after: int = 5, reason: str = "") -> None:
        super().__init__(f"the database is unavailable ({detail}); retry shortly")
        self.detail = detail
        self.retry_after = retry_after
        # Why, in words naming no host or user: what /readyz, which needs no
        # token, may say ("cannot connect"); empty when only `detail` says it.
        self.reason = reason

    def public_message(self) -> str:
        # `detail` names the database's host and user: for the operator's log only.
        return f"the database is unavailable ({self.reason or 'not reachable'}); retry shortly"

    def __reduce__(self) -> tuple[type[DatabaseUnavailable], tuple[str, int, str]]:
        # From `serve`'s start-up check, which runs in a child process.
        return type(self), (self.detail, self.retry_after, self.reason)


# Seconds a forge waits before redelivering a webhook answered 503.
QUEUE_RETRY_AFTER = 10


class QueueUnavailable(GitregError):
    """Submissions could not be stored (nothing of them was); the client should
    retry after `retry_after` seconds, as forges do for a 503."""

    status = 503

    def __init__(self, message: str, retry_after: int = QUEUE_RETRY_AFTER) -> None:
        super().__init__(message)
        self.retry_after = retry_after


# ENOSPC: no space left; EDQUOT: a disk quota reached. Both are the same
# "free space and retry" to the operator.
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_storage_full(exc: BaseException) -> bool:
    """True for OSError ENOSPC/EDQUOT: a full disk met by a file write (git
    objects, a temp file). The index engines say so as `StorageFull` themselves."""
    return isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS


def storage_full(exc: BaseException, where: str) -> StorageFull | None:
    """The `StorageFull` to raise instead of `exc`, or None if it is another error."""
    return StorageFull(f"{where} ({_reason(exc)})") if is_storage_full(exc) else None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc)


# Seconds a client waits before retrying a request the blob store failed: S3
# outages are usually short and the store's own retries already took ~1 s.
STORAGE_RETRY_AFTER = 5


class StorageUnavailable(GitregError):
    """The blob store (S3) failed or could not be reached. Nothing was half
    written (uploads are atomic), so the request can be retried as is. The
    message is what clients see; `reason`, the client library's own words
    (endpoint, bucket, key), is for the operator's log line only."""

    status = 503

    def __init__(
        self, message: str, retry_after: int = STORAGE_RETRY_AFTER, reason: str = ""
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.reason = reason


class BlobMissing(GitregError):
    """A blob the index names (an OCI layer) is not in the blob store: the
    store lost it, or a replica's store does not hold it yet. The request was
    right, so not a 404; logged as an error, since a lost blob needs the
    operator."""

    status = 503

    def __init__(self, message: str, retry_after: int = STORAGE_RETRY_AFTER) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def operator_text(exc: BaseException) -> str:
    """`exc` as the operator reads it: its message, and the reason behind it
    where that is kept out of answers to clients."""
    reason = getattr(exc, "reason", "") if isinstance(exc, StorageUnavailable) else ""
    return f"{exc}: {reason}" if reason else str(exc)


def is_outage(exc: BaseException) -> bool:
    """True when storage (the blob store or the shared index) failed or could not
    be reached: nothing was committed, and the same work succeeds once it is
    back. Logged as one warning line, never as a traceback."""
    return isinstance(exc, (StorageUnavailable, DatabaseUnavailable))


def log_level(exc: GitregError) -> int | None:
    """The level at which the code answering a request logs `exc`: None for a
    4xx, and for what was logged where it happened, once for many requests
    (QueueUnavailable by the queue, IssuerUnavailable by the issuer's keys);
    a warning for storage that is away and comes back; an error otherwise."""
    if exc.status < 500 or isinstance(exc, (QueueUnavailable, IssuerUnavailable)):
        return None
    return logging.WARNING if is_outage(exc) else logging.ERROR


class IssuerUnavailable(GitregError):
    """A trusted workload identity issuer's discovery document or keys cannot be
    fetched, so a token it signed can be neither accepted nor refused; retry
    after `retry_after` seconds."""

    status = 503

    def __init__(self, message: str, retry_after: int = 30) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NotFound(GitregError):
    """The addressed module, version, artifact or route does not exist."""

    status = 404


class UpstreamNotFound(NotFound):
    """The upstream registry answered 404: it has no such provider, version or platform."""


class UnknownReference(NotFound):
    """An OCI repository that exists (and may be read) has no manifest or blob
    by that tag or digest: the distribution spec's MANIFEST_UNKNOWN or
    BLOB_UNKNOWN, where a plain NotFound is NAME_UNKNOWN."""


class Conflict(GitregError):
    """The action would change something published, which is immutable."""

    status = 409


class ConfigError(GitregError):
    """Configuration that cannot work: gitreg's own settings (bad flag, setting or
    config file; raised at start-up), or, with `user_input`, input refused like
    a `BadRequest` (400, exit 2): a name that is no setting, or a Terraform
    configuration given to `gitreg mirror sync` that cannot be read or says
    something Terraform would refuse."""

    status = 500

    def __init__(self, message: str, *, user_input: bool = False) -> None:
        super().__init__(message)
        self.user_input = user_input
        if user_input:
            self.status = 400


class RemoteError(GitregError):
    """The registry a CLI upload (`gitreg provider publish`) talks to refused it
    or could not be reached; its message is passed on. A bad gateway, as the CLI
    stands between the operator and that registry."""

    status = 502


class GitError(GitregError):
    """A git remote could not be reached or read."""

    status = 502


class MirrorLocked(GitError):
    """A file the fetch must write is locked: left by a killed fetch, or
    (never in gitreg, which takes turns per repository) written right now."""


class ForgeError(GitError):
    """A forge API could not be reached or answered with an error (retried later)."""


class ReleasePending(ForgeError):
    """A release exists but is not complete yet (goreleaser uploads assets one by
    one after publishing the release); the job is retried with backoff."""


class UpstreamError(GitregError):
    """An upstream registry was unreachable, answered badly, or sent a package
    that failed verification; nothing of it was cached.

    `kind` is the bounded label of `gitreg_upstream_errors_total` for the
    failures that no exception type or cause tells apart."""

    status = 502

    def __init__(self, message: str, kind: str = "invalid") -> None:
        super().__init__(message)
        self.kind = kind


class UpstreamTimeout(UpstreamError):
    """An upstream registry did not answer within the mirror's timeouts."""

    status = 504


class VerificationError(UpstreamError):
    """An upstream package failed a check; it was not stored and is not served."""


class PublishError(GitregError):
    """A tag or tree cannot be published (too large, missing subdirectory)."""

    status = 422


class ArchiveTooLarge(PublishError):
    """A module tree exceeds one of the `ArchiveLimits`; the archive being
    written is then invalid and must be discarded."""


class PackageError(PublishError):
    """A provider zip that Terraform could not install, or that exceeds a limit."""


class SignatureError(PublishError):
    """A SHA256SUMS signature that is missing, malformed, or does not verify."""


class IncompleteRelease(PublishError):
    """SHA256SUMS lists packages that were not given."""

    def __init__(self, missing: list[str]) -> None:
        super().__init__(
            "SHA256SUMS lists packages that were not given: " + ", ".join(missing[:20])
        )
        self.missing = missing


class ChecksumMismatch(PublishError):
    """A package's sha256 differs from its SHA256SUMS line."""


class ResponseCut(Exception):
    """A response whose body was cut short on purpose after its headers went out
    (a mirror zip sent while it arrived failed a check: gitreg/mirror/http_stream.py;
    the blob store failed mid-body: gitreg/api/blobs.py).
    Whoever raises it has logged why in one line; it exists only to make the server
    close the connection short of the Content-Length, so it is not a GitregError
    (there is no status left to answer) and no traceback is logged for it."""

"""`gitreg doctor`: what is misconfigured, before users find out.

Each check is a small function returning a `CheckResult` (ok / warn / FAIL and
what to do), so it can be tested alone. `run_checks` runs them all in order.
Checks that need the index run only when the schema is this gitreg's own:
opening an older index would migrate it and a newer one would be refused,
and a diagnosis must change nothing. So the caller hands in how to read the
index (`read_stored`), and it is called only then.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gitreg.doctor.index import check_signing_keys, check_webhook_secrets
from gitreg.doctor.local import (
    check_blob_store,
    check_data_dir,
    check_free_space,
    check_schema,
    check_settings,
    check_tls,
)
from gitreg.doctor.network import (
    check_clock,
    check_mirror_upstreams,
    check_public_url,
    check_remotes,
)
from gitreg.doctor.results import CheckResult, fail, ok, warn
from gitreg.errors import GitregError
from gitreg.git.backend import DulwichBackend
from gitreg.providers.store import KeyRecord
from gitreg.settings import Settings
from gitreg.storage.records import RepoRecord
from gitreg.storage.schema_status import SchemaStatus
from gitreg.storage.select import open_blob_store

__all__ = ["CheckResult", "Stored", "run_checks"]

_NEED_INDEX = ("remotes", "webhook_secrets", "signing_keys")


@dataclass(frozen=True)
class Stored:
    """What the checks read from the index."""

    repos: Sequence[RepoRecord]  # the registered ones
    signing_keys: Sequence[KeyRecord]  # the active ones


def _blob_check(settings: Settings) -> CheckResult:
    where = settings.blob_store or str(settings.blob_dir)
    if not settings.data_dir.is_dir():
        # Opening the store would create the data dir, maybe at a mistyped path.
        return warn("blob_store", f"skipped: there is no data dir at {settings.data_dir}")
    try:
        blobs = open_blob_store(settings)
    except (GitregError, OSError) as exc:
        return fail("blob_store", f"cannot open {where}: {exc}")
    return check_blob_store(blobs, where)


def _index_checks(
    settings: Settings, read_stored: Callable[[], Stored], timeout: float
) -> list[CheckResult]:
    try:
        stored = read_stored()
    except (GitregError, OSError) as exc:
        return [fail(name, f"cannot open gitreg's storage: {exc}") for name in _NEED_INDEX]
    return [
        # ls-remote gets the doctor's short timeout, not a whole fetch's.
        check_remotes(stored.repos, DulwichBackend(min(timeout, settings.git_timeout))),
        check_webhook_secrets(settings, stored.repos),
        check_signing_keys(settings, stored.signing_keys),
    ]


def _stored_checks(
    settings: Settings,
    status: SchemaStatus | None,
    read_stored: Callable[[], Stored],
    timeout: float,
) -> list[CheckResult]:
    """The checks that read the index, when reading it changes nothing."""
    if status is not None and status.current and settings.data_dir.is_dir():
        # (With PostgreSQL the schema can be current while this replica's data
        # dir is missing; opening the services would create it.)
        return _index_checks(settings, read_stored, timeout)
    if status is not None and not status.exists:
        nothing = "nothing is registered yet (no index)"
        # A global webhook secret is a setting, checkable without an index.
        return [
            ok("remotes", nothing),
            check_webhook_secrets(settings, []),
            ok("signing_keys", nothing),
        ]
    reason = "skipped until the data_dir and schema checks pass (opening would change them)"
    return [warn(name, reason) for name in _NEED_INDEX]


def run_checks(
    settings: Settings, read_stored: Callable[[], Stored], timeout: float = 5.0
) -> list[CheckResult]:
    """Every check, in order. `read_stored` opens gitreg's storage and reads it;
    it is called only when that changes nothing, and its `GitregError` or
    `OSError` fails the checks that needed it."""
    results = [check_settings(settings), check_data_dir(settings), check_free_space(settings)]
    results.append(check_tls(settings))
    public, probe = check_public_url(settings, timeout)
    schema, status = check_schema(settings)
    results += [public, schema, _blob_check(settings)]
    results += _stored_checks(settings, status, read_stored, timeout)
    mirror, upstreams = check_mirror_upstreams(settings, timeout)
    results.append(mirror)
    results.append(check_clock([p for p in (probe, *upstreams) if p is not None]))
    return results

"""The ingestion queue's SQL: jobs, the deliveries that made them, schedules.

A job is "bring repository R up to date". It is written in one `BEGIN
IMMEDIATE` transaction before a webhook is answered, claimed
with a lease by one worker at a time, and retried with backoff.

States: `queued` -> `running` -> `done` | `failed`; a running job whose worker
failed transiently goes back to `queued` (or is `superseded` when another
queued job for its repository already covers it). A partial unique index
keeps at most one queued job per repository: later deliveries fold into it,
since one fetch picks up every tag pushed so far, and leave its `run_after`
alone, so deliveries during an outage do not spend its attempts. A job
`failed` because storage was unavailable (`outage`) is queued again by the
next submission for its repository, a delivery or a reconcile.

The store shares `SQLiteIndex`'s connection (same package): commits on that
connection do not change its `PRAGMA data_version`, so queue traffic does not
look like a publish by another process to the metadata cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from gitreg.audit.actor import Actor
from gitreg.errors import NotFound
from gitreg.jobs.store import STATES, Enqueued, JobKind, JobRecord, JobState, Submission
from gitreg.storage.database import Connection, Row
from gitreg.storage.index import IndexBackedStore, from_row

MAX_REASON_CHARS = 2000


def _merge_reason(old: str, new: str) -> str:
    if not new or new in old.split("; "):
        return old
    merged = f"{old}; {new}" if old else new
    if len(merged) > MAX_REASON_CHARS:
        merged = merged[: MAX_REASON_CHARS - 1] + "…"
    return merged


class JobStore(IndexBackedStore):
    # -- submitting ---------------------------------------------------------

    def enqueue(
        self,
        repo_id: int,
        kind: JobKind,
        source: str,
        reason: str,
        now: float,
        max_attempts: int,
        delivery_id: str = "",
    ) -> Enqueued:
        """Record a request to sync a repository, in one transaction."""
        wanted = Submission(repo_id, kind, source, reason, delivery_id)
        return self.enqueue_many([wanted], now, max_attempts)[0]

    def enqueue_many(
        self, submissions: Sequence[Submission], now: float, max_attempts: int
    ) -> list[Enqueued]:
        """Record several requests in ONE transaction, in order: one commit (and
        one fsync) for all of them. Either all are stored or none is; a repeated
        delivery id later in the list sees the earlier one, as if sent after it."""
        with self._write(notify=False) as conn:
            return [self._enqueue(conn, wanted, now, max_attempts) for wanted in submissions]

    def _enqueue(
        self, conn: Connection, wanted: Submission, now: float, max_attempts: int
    ) -> Enqueued:
        """One submission, inside the caller's transaction."""
        if wanted.delivery_id:
            seen = conn.execute(
                "SELECT d.job_id, j.state FROM deliveries d JOIN jobs j ON j.id = d.job_id"
                " WHERE d.source = ? AND d.delivery_id = ? AND d.repo_id = ?",
                (wanted.source, wanted.delivery_id, wanted.repo_id),
            ).fetchone()
            if seen is not None:
                if seen["state"] in ("failed", "superseded"):
                    # A forge's "redeliver" of a failed delivery retries it.
                    return self._requeue(conn, seen["job_id"], now)
                return Enqueued(seen["job_id"], "duplicate")
        queued = conn.execute(
            "SELECT id, kind, reason FROM jobs WHERE repo_id = ? AND state = 'queued'",
            (wanted.repo_id,),
        ).fetchone()
        status: Literal["queued", "merged", "requeued"]
        if queued is not None:
            job_id, status = self._fold_into(conn, queued, wanted), "merged"
        elif (stranded := _failed_by_outage(conn, wanted.repo_id)) is not None:
            job_id, status = self._fold_into(conn, stranded, wanted), "requeued"
            self._requeue(conn, job_id, now)
        else:
            job_id, status = self._new_job(conn, wanted, now, max_attempts), "queued"
        if wanted.delivery_id:
            conn.execute(
                "INSERT INTO deliveries (source, delivery_id, repo_id, job_id, received_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (wanted.source, wanted.delivery_id, wanted.repo_id, job_id, now),
            )
        return Enqueued(job_id, status)

    def _fold_into(self, conn: Connection, queued: Row, wanted: Submission) -> int:
        # A sync covers a reconcile (it fetches regardless). `run_after` stays: cutting
        # a backoff wait short would spend an attempt per push during an outage.
        conn.execute(
            "UPDATE jobs SET kind = ?, reason = ?, deliveries = deliveries + ? WHERE id = ?",
            (
                "sync" if "sync" in (wanted.kind, queued["kind"]) else "reconcile",
                _merge_reason(queued["reason"], wanted.reason),
                1 if wanted.delivery_id else 0,
                queued["id"],
            ),
        )
        _keep_principal(conn, int(queued["id"]), wanted.actor)
        return int(queued["id"])

    def _new_job(self, conn: Connection, wanted: Submission, now: float, max_attempts: int) -> int:
        cursor = conn.execute(
            "INSERT INTO jobs (repo_id, kind, state, source, reason, deliveries,"
            " max_attempts, run_after, created_at, actor_kind, actor_name, actor_rule)"
            " VALUES (?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                wanted.repo_id,
                wanted.kind,
                wanted.source,
                wanted.reason[:MAX_REASON_CHARS],
                1 if wanted.delivery_id else 0,
                max_attempts,
                now,
                now,
                wanted.actor.kind,
                wanted.actor.name,
                wanted.actor.rule,
            ),
        )
        return int(cursor.fetchone()[0])

    def retry(self, job_id: int, now: float) -> Enqueued:
        """Queue a failed (or superseded) job again; other states are left alone."""
        with self._write(notify=False) as conn:
            row = conn.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise NotFound(f"no job {job_id}")
            if row["state"] not in ("failed", "superseded"):
                return Enqueued(job_id, "duplicate")
            return self._requeue(conn, job_id, now)

    def _requeue(self, conn: Connection, job_id: int, now: float) -> Enqueued:
        repo_id = conn.execute("SELECT repo_id FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]
        queued = conn.execute(
            "SELECT id FROM jobs WHERE repo_id = ? AND state = 'queued'", (repo_id,)
        ).fetchone()
        if queued is not None:
            _keep_principal(conn, int(queued["id"]), _actor_of(conn, job_id))
            return Enqueued(int(queued["id"]), "merged")
        # A sync, as every attempt after a failed one (see `_take`).
        conn.execute(
            "UPDATE jobs SET state = 'queued', kind = 'sync', attempts = 0, run_after = ?,"
            " lease_owner = '', lease_until = 0, finished_at = NULL, outage = 0 WHERE id = ?",
            (now, job_id),
        )
        return Enqueued(job_id, "requeued")

    # -- working ------------------------------------------------------------

    def claim(self, owner: str, now: float, lease: float) -> JobRecord | None:
        """Atomically take the next runnable job and lease it to `owner`.

        Runnable: queued and due, or running with an expired lease (its worker
        died). A repository with a live running job is skipped, so jobs for one
        repository run one at a time while different repositories run in parallel.
        """
        # Idle workers poll: look without the write lock first.
        if not self._rows(
            "SELECT 1 FROM jobs WHERE (state = 'queued' AND run_after <= ?)"
            " OR (state = 'running' AND lease_until <= ?) LIMIT 1",
            (now, now),
        ):
            return None
        if self._dialect == "postgresql":
            return self._claim_with_row_locks(owner, now, lease)
        with self._write(notify=False) as conn:
            _fail_lost_jobs(conn, now)
            row = conn.execute(_RUNNABLE + " LIMIT 1", {"now": now}).fetchone()
            if row is None:
                return None
            return _take(conn, int(row["id"]), owner, now, lease)

    def _claim_with_row_locks(self, owner: str, now: float, lease: float) -> JobRecord | None:
        """PostgreSQL: replicas claim side by side instead of queueing on the
        write lock. `FOR UPDATE SKIP LOCKED` hands each claimer rows no other
        claimer holds; a transaction-scoped advisory lock per repository keeps
        two replicas from starting two jobs of one repository at once, and the
        runnable check is repeated under it to see a claim committed meanwhile."""
        with self._write(notify=False, exclusive=False) as conn:
            _fail_lost_jobs(conn, now)
            candidates = conn.execute(
                _RUNNABLE + " LIMIT 8 FOR UPDATE OF j SKIP LOCKED", {"now": now}
            ).fetchall()
            for candidate in candidates:
                locked = conn.execute(
                    "SELECT pg_try_advisory_xact_lock(?)",
                    (REPO_CLAIM_LOCK + candidate["repo_id"],),
                ).fetchone()
                if not locked[0]:
                    continue
                still = conn.execute(
                    "SELECT 1 FROM jobs j WHERE j.id = :id AND" + _RUNNABLE_WHERE,  # noqa: S608
                    {"now": now, "id": candidate["id"]},
                ).fetchone()
                if still is not None:
                    return _take(conn, int(candidate["id"]), owner, now, lease)
            return None

    def renew(self, owner: str, job_ids: list[int], until: float) -> list[int]:
        """Extend the leases `owner` still holds; returns the ids it still holds."""
        if not job_ids:
            return []
        marks = ",".join("?" * len(job_ids))
        with self._write(notify=False) as conn:
            rows = conn.execute(
                f"UPDATE jobs SET lease_until = ? WHERE lease_owner = ? AND state = 'running'"  # noqa: S608
                f" AND id IN ({marks}) RETURNING id",
                (until, owner, *job_ids),
            ).fetchall()
        return [int(r[0]) for r in rows]

    def finish(self, job_id: int, owner: str, now: float, result: str) -> bool:
        """Mark a job done; False if `owner` no longer held it (lease lost)."""
        with self._write(notify=False) as conn:
            cursor = conn.execute(
                "UPDATE jobs SET state = 'done', finished_at = ?, result = ?, last_error = '',"
                " lease_owner = '', lease_until = 0, outage = 0"
                " WHERE id = ? AND lease_owner = ? AND state = 'running'",
                (now, result, job_id, owner),
            )
            return cursor.rowcount == 1

    def fail(
        self,
        job_id: int,
        owner: str,
        now: float,
        error: str,
        retry_at: float | None,
        outage: bool = False,
    ) -> JobState | None:
        """Record a failed attempt: back to `queued` at `retry_at`, or `failed`
        for good when `retry_at` is None or attempts are used up. Returns the new
        state, or None if `owner` no longer held the job. `outage`: storage was
        unavailable, so a `failed` job runs again at the next submission."""
        with self._write(notify=False) as conn:
            row = conn.execute(
                "SELECT repo_id, attempts, max_attempts FROM jobs"
                " WHERE id = ? AND lease_owner = ? AND state = 'running'",
                (job_id, owner),
            ).fetchone()
            if row is None:
                return None
            state: JobState
            if retry_at is None or row["attempts"] >= row["max_attempts"]:
                state = "failed"
            else:
                other = conn.execute(
                    "SELECT id FROM jobs WHERE repo_id = ? AND state = 'queued'",
                    (row["repo_id"],),
                ).fetchone()
                state = "queued" if other is None else "superseded"
                if other is not None:
                    _keep_principal(conn, int(other["id"]), _actor_of(conn, job_id))
            conn.execute(
                "UPDATE jobs SET state = ?, last_error = ?, lease_owner = '', lease_until = 0,"
                " run_after = ?, finished_at = ?, outage = ? WHERE id = ?",
                (
                    state,
                    error,
                    retry_at if state == "queued" else now,
                    None if state == "queued" else now,
                    1 if outage else 0,
                    job_id,
                ),
            )
            return state

    def expire_leases(self, owners: list[str]) -> int:
        """End the leases of workers known to be dead, so their jobs run now."""
        if not owners:
            return 0
        marks = ",".join("?" * len(owners))
        with self._write(notify=False) as conn:
            cursor = conn.execute(
                f"UPDATE jobs SET lease_until = 0 WHERE state = 'running'"  # noqa: S608
                f" AND lease_owner IN ({marks})",
                tuple(owners),
            )
            return cursor.rowcount

    def running_owners(self) -> list[str]:
        rows = self._rows("SELECT DISTINCT lease_owner FROM jobs WHERE state = 'running'")
        return [r[0] for r in rows]

    # -- reading ------------------------------------------------------------

    def job(self, job_id: int) -> JobRecord:
        rows = self._rows("SELECT * FROM jobs WHERE id = ?", (job_id,))
        if not rows:
            raise NotFound(f"no job {job_id}")
        return _job(rows[0])

    def jobs(
        self, state: str | None = None, repo_id: int | None = None, limit: int = 100
    ) -> list[JobRecord]:
        """Newest first."""
        clauses: list[str] = []
        params: list[Any] = []
        if state:
            clauses.append("state = ?")
            params.append(state)
        if repo_id is not None:
            clauses.append("repo_id = ?")
            params.append(repo_id)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._rows(
            f"SELECT * FROM jobs{where} ORDER BY id DESC LIMIT ?",  # noqa: S608
            (*params, limit),
        )
        return [_job(r) for r in rows]

    def counts(self) -> dict[str, int]:
        rows = self._rows("SELECT state, count(*) FROM jobs GROUP BY state")
        found = {r[0]: int(r[1]) for r in rows}
        return {state: found.get(state, 0) for state in STATES}

    def delivery_count(self) -> int:
        return int(self._rows("SELECT count(*) FROM deliveries")[0][0])

    # -- housekeeping -------------------------------------------------------

    def prune(self, before: float) -> int:
        """Forget finished jobs (and their delivery ids) older than `before`."""
        with self._write(notify=False) as conn:
            old = "SELECT id FROM jobs WHERE state IN ('done', 'superseded') AND finished_at < ?"
            conn.execute(f"DELETE FROM deliveries WHERE job_id IN ({old})", (before,))  # noqa: S608
            cursor = conn.execute(f"DELETE FROM jobs WHERE id IN ({old})", (before,))  # noqa: S608
            return cursor.rowcount

    def claim_schedule(self, name: str, now: float, interval: float) -> bool:
        """True for exactly one caller per `interval`, across processes."""
        # Read first: a write every few seconds from every process would look
        # like a publish to the other processes' metadata caches.
        due = self._rows("SELECT next_run FROM schedules WHERE name = ?", (name,))
        if due and due[0][0] > now:
            return False
        with self._write(notify=False) as conn:
            conn.execute(
                "INSERT INTO schedules (name, next_run) VALUES (?, 0) ON CONFLICT DO NOTHING",
                (name,),
            )
            cursor = conn.execute(
                "UPDATE schedules SET next_run = ? WHERE name = ? AND next_run <= ?",
                (now + interval, name, now),
            )
            return cursor.rowcount == 1


# Runnable: queued and due, or running with an expired lease (its worker died),
# and no other job of its repository running under a live lease.
_RUNNABLE_WHERE = (
    " ((j.state = 'queued' AND j.run_after <= :now)"
    "  OR (j.state = 'running' AND j.lease_until <= :now))"
    " AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.repo_id = j.repo_id"
    "  AND r.id != j.id AND r.state = 'running' AND r.lease_until > :now)"
)
_RUNNABLE = (
    "SELECT j.id, j.repo_id FROM jobs j WHERE"  # noqa: S608 (constant text)
    + _RUNNABLE_WHERE
    + " ORDER BY j.state = 'running' DESC, j.run_after, j.id"
)
# Advisory lock keys (PostgreSQL, 64-bit): one per repository, in a range of
# their own so they cannot meet the write lock or the migration lock.
REPO_CLAIM_LOCK = 0x6A6F62 << 32


def _failed_by_outage(conn: Connection, repo_id: int) -> Row | None:
    """The repository's latest job, if storage being unavailable failed it."""
    latest: Row | None = conn.execute(
        "SELECT id, kind, reason, state, outage FROM jobs WHERE repo_id = ?"
        " ORDER BY id DESC LIMIT 1",
        (repo_id,),
    ).fetchone()
    if latest is None or latest["state"] != "failed" or not latest["outage"]:
        return None
    return latest


def _fail_lost_jobs(conn: Connection, now: float) -> None:
    """A job whose lease expired with its attempts used up fails for good."""
    conn.execute(
        "UPDATE jobs SET state = 'failed', finished_at = ?, lease_owner = '',"
        " last_error = 'worker lost (lease expired) ' || attempts || ' times; '"
        " || last_error WHERE state = 'running' AND lease_until <= ?"
        " AND attempts >= max_attempts",
        (now, now),
    )


def _take(conn: Connection, job_id: int, owner: str, now: float, lease: float) -> JobRecord:
    """Lease a job to `owner`. A job's second and later attempts are syncs: an
    attempt that failed (or whose worker died) after fetching left tags in the
    mirror that a reconcile's remote-tag check would take as published."""
    claimed = conn.execute(
        "UPDATE jobs SET state = 'running', lease_owner = ?, lease_until = ?,"
        " kind = CASE WHEN attempts > 0 THEN 'sync' ELSE kind END,"
        " attempts = attempts + 1, started_at = ? WHERE id = ? RETURNING *",
        (owner, now + lease, now, job_id),
    ).fetchone()
    return _job(claimed)


def _keep_principal(conn: Connection, job_id: int, actor: Actor) -> None:
    """`actor` also asked for queued job `job_id`: the first principal to ask
    stays its actor, so a webhook or reconcile that queued it first, or folds
    in later, does not hide who triggered the sync."""
    conn.execute(
        "UPDATE jobs SET actor_kind = ?, actor_name = ?, actor_rule = ?"
        " WHERE id = ? AND actor_kind = 'system'",
        (actor.kind, actor.name, actor.rule, job_id),
    )


def _actor_of(conn: Connection, job_id: int) -> Actor:
    row = conn.execute(
        "SELECT actor_kind, actor_name, actor_rule FROM jobs WHERE id = ?", (job_id,)
    ).fetchone()
    return Actor(row["actor_kind"], row["actor_name"], row["actor_rule"])


def _job(row: Row) -> JobRecord:
    actor = Actor(row["actor_kind"], row["actor_name"], row["actor_rule"])
    return from_row(JobRecord, row, outage=bool(row["outage"]), actor=actor)

"""Whether this process can serve and publish: what `/readyz` answers
(docs/security.md): the index writable, the blob store writable, the disk not full.

`Health.readiness` answers within `ANSWER_WITHIN`, under Kubernetes' default
probe timeout of 1 s, whatever its dependencies do. The index's health comes
from state refreshed in the background: on PostgreSQL the change feed polls
the database every 0.5 s on a connection of its own, with its own short
connect timeout (gitreg/storage/postgres.py), so a database that stopped or
came back is seen within a poll and never waited on. The checks run on a
thread of their own, one run at a time that every caller arriving meanwhile
shares; a run still going after `ANSWER_WITHIN` (a blob store or disk that
does not answer, an SQLite write lock held long) is itself the answer, naming
the check.

The report also names repositories whose last sync failed, apart
from the problems: that is a problem of one repository's remote or mirror, not
of this replica, and every replica shares the data dir, so counting it as
unready would take all of them out of rotation and stop serving every module
already published. It gives ids and a status word, not URLs or error text,
because `/readyz` needs no token; `gitreg repo list` and `GET /admin/repos`
say why.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from gitreg.errors import DatabaseUnavailable, is_storage_full
from gitreg.settings import Settings
from gitreg.storage.blobs import BlobStore
from gitreg.storage.protocols import ModuleIndex
from gitreg.storage.records import RepoRecord

# A write of this size must succeed: an empty file can still be created on a
# filesystem with no free blocks left.
PROBE_BYTES = 16 * 1024
# Seconds `readiness` waits for the checks before answering without them.
ANSWER_WITHIN = 0.8


@dataclass
class Report:
    """Ready when `problems` is empty; each problem names no host and no secret."""

    problems: list[str] = field(default_factory=list)
    failing_repos: list[dict[str, object]] = field(default_factory=list)
    checking: str = ""  # the check running now, for an answer given before the end


class Health:
    """The readiness checks of one process; safe to share between requests."""

    def __init__(
        self,
        settings: Settings,
        index: ModuleIndex,
        blobs: BlobStore,
        repos: Callable[[], list[RepoRecord]],
    ) -> None:
        self._settings = settings
        self._index = index
        self._blobs = blobs
        self._repos = repos  # every registered repository
        self._lock = threading.Lock()
        self._run: tuple[Report, Future[None]] | None = None

    async def readiness(self) -> Report:
        """The report of the run in flight, or of one started now, within
        ANSWER_WITHIN; a run not done by then answers with one problem naming
        the check it is still in."""
        report, done = self._start()
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(done)), ANSWER_WITHIN)
        except TimeoutError:
            waited = f"readiness checks did not finish within {ANSWER_WITHIN:g} s"
            return Report([f"{waited}: the {report.checking or 'index'} does not answer"])
        return report

    def _start(self) -> tuple[Report, Future[None]]:
        with self._lock:
            if self._run is not None and not self._run[1].done():
                return self._run
            run: tuple[Report, Future[None]] = (Report(), Future())
            self._run = run
        thread = threading.Thread(target=self._checked, args=run, name="gitreg-readyz", daemon=True)
        thread.start()
        return run

    def _checked(self, report: Report, done: Future[None]) -> None:
        try:
            self._check(report)
        except BaseException as exc:  # the waiting caller answers with it
            report.problems.append(f"readiness check failed: {exc!r}")
        done.set_result(None)

    def _check(self, report: Report) -> None:
        report.checking = "index"
        if (problem := self._index_problem()) is not None:
            report.problems.append(problem)
        self._storage_problems(report)
        if report.problems:
            return
        report.checking = "repositories"
        try:
            report.failing_repos = [
                {"id": r.id, "status": "error", "last_fetch_at": r.last_fetch_at}
                for r in self._repos()
                if r.last_fetch_error
            ]
        except DatabaseUnavailable:  # down since the index was checked
            report.problems.append("index not readable: the database is unavailable")
        report.checking = ""

    def _index_problem(self) -> str | None:
        try:
            self._index.check_writable()
        except DatabaseUnavailable as exc:
            # Not the message: it names the database host, and /readyz needs no token.
            reason = f" ({exc.reason})" if exc.reason else ""
            return f"index not writable: the database is unavailable{reason}"
        except Exception as exc:  # any failure means "not ready", with its reason
            return f"index not writable: {exc}"
        return None

    def _storage_problems(self, report: Report) -> None:
        """Reports "storage full: ..." when the data dir's filesystem has less than
        `min_free_bytes` free for unprivileged writers (what gitreg gets), or when a
        small real write to the blob store fails for lack of space; one probe write
        per call, whose other failures say the blob store is not writable."""
        floor = self._settings.min_free_bytes
        report.checking = "data dir's free space"
        try:
            free = shutil.disk_usage(self._settings.data_dir).free
        except OSError as exc:
            report.problems.append(f"data dir not usable: {exc.strerror}")
        else:
            if free < floor:
                report.problems.append(
                    f"storage full: only {free // 2**20} MiB free in the data dir, "
                    f"below min_free_bytes ({floor} bytes)"
                )
        report.checking = "blob store"
        try:
            self._blobs.check_writable(PROBE_BYTES)
        except OSError as exc:
            if is_storage_full(exc):
                report.problems.append(f"storage full: {exc.strerror} in the data dir")
            else:
                report.problems.append(f"blob store not writable: {exc.strerror}")

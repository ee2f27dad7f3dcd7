"""`/healthz` (the process answers; no dependencies) and `/readyz` (can serve
and publish: index writable, blob store writable, disk not full), checklist H3.

`/readyz` answers within `ANSWER_WITHIN`, under Kubernetes' default probe
timeout of 1 s, whatever its dependencies do. The index's health comes from
state refreshed in the background: on PostgreSQL the change feed polls the
database every 0.5 s on a connection of its own, with its own short connect
timeout (gitreg/storage/postgres.py), so a database that stopped or came back
is seen within a poll and never waited on. The checks run on a thread of their
own, one run at a time that every request arriving meanwhile shares; a run
still going after `ANSWER_WITHIN` (a blob store or disk that does not answer,
an SQLite write lock held long) is itself the answer: 503, naming the check.
A replica started while PostgreSQL is down answers 503 until it is back
(gitreg/api/startup.py).

`/readyz` also names repositories whose last sync failed (issue 10), in its
body only: that is a problem of one repository's remote or mirror, not of this
replica, and every replica shares the data dir, so answering 503 would take
all of them out of rotation and stop serving every module already published.
The body gives ids and a status word, not URLs or error text, because
`/readyz` needs no token; `gitreg repo list` and `GET /admin/repos` say why.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gitreg.api.responses import json_response
from gitreg.api.startup import waiting_for
from gitreg.canonical_json import json_bytes
from gitreg.errors import DatabaseUnavailable, is_storage_full
from gitreg.modules.publisher import sync_status
from gitreg.services import Services, services

# A write of this size must succeed: an empty file can still be created on a
# filesystem with no free blocks left.
PROBE_BYTES = 16 * 1024
# Seconds /readyz waits for the checks before answering without them.
ANSWER_WITHIN = 0.8


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    failing_repos: list[dict[str, object]] = field(default_factory=list)
    checking: str = ""  # the check running now, for an answer given before the end


async def healthz(request: Request) -> Response:
    return json_response(b'{"status":"ok"}')


def _index_problem(svc: Services) -> str | None:
    try:
        svc.index.check_writable()
    except DatabaseUnavailable as exc:
        # Not the message: it names the database host, and /readyz needs no token.
        reason = f" ({exc.reason})" if exc.reason else ""
        return f"index not writable: the database is unavailable{reason}"
    except Exception as exc:  # any failure means "not ready", with its reason
        return f"index not writable: {exc}"
    return None


def _storage_problems(svc: Services, report: Report) -> None:
    """Reports "storage full: ..." when the data dir's filesystem has less than
    `min_free_bytes` free for unprivileged writers (what gitreg gets), or when a
    small real write to the blob store fails for lack of space; one probe write
    per call, whose other failures say the blob store is not writable."""
    floor = svc.settings.min_free_bytes
    report.checking = "data dir's free space"
    try:
        free = shutil.disk_usage(svc.settings.data_dir).free  # what unprivileged writers get
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
        svc.blobs.check_writable(PROBE_BYTES)
    except OSError as exc:
        if is_storage_full(exc):
            report.problems.append(f"storage full: {exc.strerror} in the data dir")
        else:
            report.problems.append(f"blob store not writable: {exc.strerror}")


def _check(svc: Services, report: Report) -> None:
    report.checking = "index"
    if (problem := _index_problem(svc)) is not None:
        report.problems.append(problem)
    _storage_problems(svc, report)
    if report.problems:
        return
    report.checking = "repositories"
    try:
        report.failing_repos = [
            {"id": r.id, "status": sync_status(r), "last_fetch_at": r.last_fetch_at}
            for r in svc.index.repos()
            if r.last_fetch_error
        ]
    except DatabaseUnavailable:  # down since the index was checked
        report.problems.append("index not readable: the database is unavailable")
    report.checking = ""


class Readiness:
    """Runs the checks off the event loop, one run at a time: a request joins
    the run in flight or starts one, and waits for it at most ANSWER_WITHIN."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._run: tuple[Report, Future[None]] | None = None

    async def report(self, svc: Services) -> Report:
        report, done = self._start(svc)
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(done)), ANSWER_WITHIN)
        except TimeoutError:
            waited = f"readiness checks did not finish within {ANSWER_WITHIN:g} s"
            return Report([f"{waited}: the {report.checking or 'index'} does not answer"])
        return report

    def _start(self, svc: Services) -> tuple[Report, Future[None]]:
        with self._lock:
            if self._run is not None and not self._run[1].done():
                return self._run
            run: tuple[Report, Future[None]] = (Report(), Future())
            self._run = run
        thread = threading.Thread(target=_run, args=(svc, *run), name="gitreg-readyz", daemon=True)
        thread.start()
        return run


def _run(svc: Services, report: Report, done: Future[None]) -> None:
    try:
        _check(svc, report)
    except BaseException as exc:  # the waiting request answers with it
        report.problems.append(f"readiness check failed: {exc!r}")
    done.set_result(None)


def readiness(request: Request) -> Readiness:
    found = request.app.state.readiness
    assert isinstance(found, Readiness)
    return found


async def readyz(request: Request) -> Response:
    if (reason := waiting_for(request.app)) is not None:
        return json_response(json_bytes({"errors": [f"index not writable: {reason}"]}), status=503)
    report = await readiness(request).report(services(request))
    if report.problems:
        return json_response(json_bytes({"errors": report.problems}), status=503)
    if report.failing_repos:  # still 200: see the module docstring
        return json_response(json_bytes({"status": "ready", "failing_repos": report.failing_repos}))
    return json_response(b'{"status":"ready"}')


def routes() -> list[Route]:
    return [Route("/healthz", healthz), Route("/readyz", readyz)]

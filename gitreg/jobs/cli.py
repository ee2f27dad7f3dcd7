"""`gitreg jobs`: the ingestion queue. Registers its own parsers; `handler(svc, args)` runs."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gitreg.cli_handlers import ReadOnly
from gitreg.jobs.store import JobRecord, iso
from gitreg.jobs.store_sql import STATES
from gitreg.services import Services


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    jobs = sub.add_parser("jobs", parents=[common], help="show and retry webhook/reconcile jobs")
    jobs.set_defaults(handler=ReadOnly(list_jobs), state=None, limit=30, json=False)
    jobs_sub = jobs.add_subparsers(dest="jobs_command")
    lst = jobs_sub.add_parser("list", parents=[common], help="jobs, newest first (default)")
    lst.add_argument("--state", choices=STATES)
    lst.add_argument("--limit", type=int, default=30)
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(handler=ReadOnly(list_jobs))
    retry = jobs_sub.add_parser("retry", parents=[common], help="queue a failed job again")
    retry.add_argument("job_id", type=int)
    retry.set_defaults(handler=retry_job)
    run = jobs_sub.add_parser(
        "run", parents=[common], help="run queued jobs in this process until none is due"
    )
    run.set_defaults(handler=run_jobs)
    reconcile = jobs_sub.add_parser(
        "reconcile", parents=[common], help="queue a remote tag check for every repository"
    )
    reconcile.set_defaults(handler=reconcile_all)


def _line(svc: Services, job: JobRecord) -> str:
    repo = svc.index.repo(job.repo_id).url
    text = f"#{job.id:<5} {job.state:<10} {job.kind:<9} {job.source:<9} {repo}"
    text += f"\n       attempts {job.attempts}/{job.max_attempts}, created {iso(job.created_at)}"
    if job.state == "queued" and job.attempts:
        text += f", next try {iso(job.run_after)}"
    text += f"\n       {job.reason}"
    if job.last_error:
        text += f"\n       error: {job.last_error}"
    return text


def list_jobs(svc: Services, args: argparse.Namespace) -> int:
    store = svc.jobs.store
    jobs = store.jobs(state=args.state, limit=max(1, args.limit))
    if args.json:
        print(json.dumps({"counts": store.counts(), "jobs": [j.to_json() for j in jobs]}, indent=2))
        return 0
    counts = store.counts()
    print(", ".join(f"{n} {state}" for state, n in counts.items() if n) or "no jobs")
    for job in jobs:
        print(_line(svc, job))
    moves = svc.module_proxy.moves()
    if moves:
        # Cached public modules whose upstream tag moved (docs/module-proxy.md).
        print(f"{len(moves)} moved upstream tag(s) of cached modules; see `gitreg modules proxied`")
    return 1 if args.state is None and counts["failed"] else 0


def retry_job(svc: Services, args: argparse.Namespace) -> int:
    outcome = svc.jobs.retry(args.job_id)
    if outcome.status == "duplicate":
        print(f"job {args.job_id} is not failed; nothing to retry", file=sys.stderr)
        return 1
    print(f"job {outcome.job_id} {outcome.status}")
    return 0


def run_jobs(svc: Services, args: argparse.Namespace) -> int:
    runner = svc.job_runner()
    done = runner.drain()
    for job in done:
        print(_line(svc, job))
    return 1 if any(j.state == "failed" for j in done) else 0


def reconcile_all(svc: Services, args: argparse.Namespace) -> int:
    runner = svc.job_runner()
    print(f"queued a remote tag check for {runner.reconcile()} repositories")
    return 0

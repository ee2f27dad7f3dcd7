"""`gitreg jobs`: the ingestion queue. Registers its own parsers; `handler(svc, args)` runs."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gitreg.cli_handlers import ReadOnly
from gitreg.jobs.service import JobView
from gitreg.jobs.store import STATES, iso
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


def _line(view: JobView) -> str:
    job = view.job
    repo = view.repository or f"repository #{job.repo_id} (gone)"
    text = f"#{job.id:<5} {job.state:<10} {job.kind:<9} {job.source:<9} {repo}"
    text += f"\n       attempts {job.attempts}/{job.max_attempts}, created {iso(job.created_at)}"
    if job.state == "queued" and job.attempts:
        text += f", next try {iso(job.run_after)}"
    text += f"\n       {job.reason}"
    if job.last_error:
        text += f"\n       error: {job.last_error}"
    return text


def list_jobs(svc: Services, args: argparse.Namespace) -> int:
    found = svc.jobs.listing(args.state, max(1, args.limit))
    if args.json:
        jobs = [j.job.to_json() for j in found.jobs]
        print(json.dumps({"counts": found.counts, "jobs": jobs}, indent=2))
        return 0
    counts = found.counts
    print(", ".join(f"{n} {state}" for state, n in counts.items() if n) or "no jobs")
    for view in found.jobs:
        print(_line(view))
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
    print(f"job {outcome.job.job.id} {outcome.status}")
    return 0


def run_jobs(svc: Services, args: argparse.Namespace) -> int:
    done = svc.jobs.run_due()
    for view in done:
        print(_line(view))
    return 1 if any(v.job.state == "failed" for v in done) else 0


def reconcile_all(svc: Services, args: argparse.Namespace) -> int:
    print(f"queued a remote tag check for {svc.jobs.reconcile()} repositories")
    return 0

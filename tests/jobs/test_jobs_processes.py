"""Several processes on one data dir never claim the same job."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from gitreg.jobs.store_sql import JobStore
from gitreg.storage.index import SQLiteIndex

WORKERS = 4
REPOS = 60

# Each process claims until the queue is empty and finishes what it claimed;
# it prints the ids it got. Real claims, real SQLite, real processes.
CLAIMER = """
import json, sys, time
from pathlib import Path
from gitreg.storage.index import SQLiteIndex
from gitreg.jobs.store_sql import JobStore

index = SQLiteIndex(Path(sys.argv[1]))
store = JobStore(index)
owner = sys.argv[2]
start = float(sys.argv[3])
while time.time() < start:
    time.sleep(0.001)
got = []
idle = 0
while idle < 50:
    job = store.claim(owner, time.time(), 60)
    if job is None:
        idle += 1
        time.sleep(0.002)
        continue
    idle = 0
    got.append(job.id)
    assert store.finish(job.id, owner, time.time(), "{}")
print(json.dumps(got))
"""


def test_concurrent_processes_claim_each_job_exactly_once(tmp_path: Path) -> None:
    db = tmp_path / "index.sqlite3"
    index = SQLiteIndex(db)
    store = JobStore(index)
    for number in range(REPOS):
        repo = index.add_repo(f"/srv/git/r{number}.git", f"acme/r{number}")
        store.enqueue(repo.id, "sync", "test", "x", time.time(), 3, delivery_id=f"d{number}")
    start = time.time() + 1.5  # all processes start claiming together
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, str(db), f"worker-{n}", str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WORKERS)
    ]
    claimed: list[int] = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        assert "database is locked" not in err
        claimed.extend(json.loads(out))
    assert sorted(claimed) == sorted(j.id for j in store.jobs(limit=1000))
    assert len(claimed) == len(set(claimed)) == REPOS
    assert all(j.state == "done" and j.attempts == 1 for j in store.jobs(limit=1000))
    index.close()

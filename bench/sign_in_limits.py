"""What the global cap on pending sign-ins adds to each anonymous
`/oauth/authorization` and sign-in POST (docs/sign-in.md, "Limits").

Each such request already writes one `login_states` row (`put_login_state`, a
committed, fsync'd transaction); the cap adds one `count_login_states(now,
sign_in_pending_max)` before it. This measures both through the storage layer,
in this process, with 0, 1,000 and 10,000 (the default cap: the worst case,
every count reads the whole capped range) unexpired rows in the table, on
SQLite in a temporary data dir and, with `--postgres start`, on a PostgreSQL
server of its own (tests/support/postgres.py). Wall and this process's CPU
per call, medians of `--rounds`; PostgreSQL's own CPU is not counted.

    python bench/sign_in_limits.py --postgres start     # SQLite and PostgreSQL
    python bench/sign_in_limits.py [--calls 200] [--rounds 5] [--postgres URL]
"""

from __future__ import annotations

import argparse
import itertools
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support: PostgreSQL

from gitreg.auth.store import AuthIndex
from gitreg.services import build_services
from gitreg.settings import load_settings

CAP = 10_000  # the default sign_in_pending_max
LEVELS = (0, 1_000, CAP)
_keys = itertools.count()


def _per_call(calls: int, fn: Callable[[], object]) -> tuple[float, float]:
    """(wall us, CPU us) per call."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    return (
        (time.perf_counter() - wall) / calls * 1e6,
        (time.process_time() - cpu) / calls * 1e6,
    )


def _fill(auth: AuthIndex, rows: int) -> None:
    now = time.time()
    while auth.count_login_states(now, CAP + 1) < rows:
        auth.put_login_state(f"fill:{next(_keys)}", "{}", now + 3600, now)


def _measure(auth: AuthIndex, calls: int, rounds: int) -> list[list[str]]:
    lines = []
    for level in LEVELS:
        _fill(auth, level)
        counts, puts = [], []
        for _ in range(rounds):
            counts.append(_per_call(calls, lambda: auth.count_login_states(time.time(), CAP)))
            # The write every request already does; its rows expire at once,
            # so the level stays what it is (they are swept by the next put).
            puts.append(
                _per_call(
                    calls,
                    lambda: auth.put_login_state(
                        f"bench:{next(_keys)}", "{}", time.time(), time.time()
                    ),
                )
            )
        row = [f"{level:,}"]
        for runs in (counts, puts):
            row += [f"{statistics.median(w for w, _ in runs):.0f}"]
            row += [f"{statistics.median(c for _, c in runs):.0f}"]
        lines.append(row)
    return lines


def _engine(name: str, url: str, calls: int, rounds: int) -> list[list[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        given: dict[str, object] = {"data_dir": Path(tmp)}
        if url:
            given["database_url"] = url
            key = Path(tmp) / "key"  # replicas on PostgreSQL must have one
            key.write_text(secrets.token_hex(32))
            key.chmod(0o600)
            given["secret_key_file"] = key
        svc = build_services(load_settings(given, environ={}))
        try:
            return [[name, *row] for row in _measure(svc.auth, calls, rounds)]
        finally:
            svc.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", default="", help="a database URL, or `start`")
    args = parser.parse_args()
    print("| index | unexpired rows | count us | count CPU us | put (the write) us | put CPU us |")
    print("|---|---|---|---|---|---|")
    rows = _engine("sqlite", "", args.calls, args.rounds)
    if args.postgres == "start":
        from tests.support.postgres import start_postgres

        server = start_postgres()
        try:
            url = server.create_database().url
            rows += _engine("postgresql", url, args.calls, args.rounds)
        finally:
            server.close()
    elif args.postgres:
        rows += _engine("postgresql", args.postgres, args.calls, args.rounds)
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()

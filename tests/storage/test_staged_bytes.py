"""The staging quotas' ledger (gitreg/storage/staged_bytes.py) on both engines.

Replicas share one index but each opens its own engine: here two `Index`
instances on one SQLite file (two connections) or one PostgreSQL database
(two connection pools) stand for two replicas. Reservations racing through
both never hold more than the quota together.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitreg.storage.index import Index, SQLiteIndex, open_index
from gitreg.storage.staged_bytes import StagedBytesStore, StagedFile, StagingQuota

QUOTA = StagingQuota(per_token=10, total=25)
Replicas = Callable[[], tuple[StagedBytesStore, StagedBytesStore]]


@pytest.fixture(params=["sqlite", "postgresql"])
def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Replicas]:
    opened: list[Index] = []

    def one() -> Index:
        if request.param == "sqlite":
            index: Index = SQLiteIndex(tmp_path / "index.sqlite3")
        else:
            url = request.getfixturevalue("postgres_database").url
            index = open_index(url, tmp_path / "unused.sqlite3")
        opened.append(index)
        return index

    yield lambda: (StagedBytesStore(one()), StagedBytesStore(one()))
    for index in opened:
        index.close()


def _race(attempts: list[Callable[[], object]]) -> list[object]:
    """Run every attempt at once on its own thread; their results, in order."""
    start = threading.Barrier(len(attempts))
    results: list[object] = [None] * len(attempts)

    def run(n: int) -> None:
        start.wait()
        results[n] = attempts[n]()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(attempts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _held(store: StagedBytesStore, token: int | None = None) -> int:
    if token is None:
        rows = store._rows("SELECT COALESCE(SUM(bytes), 0) FROM staged_bytes")
    else:
        rows = store._rows(
            "SELECT COALESCE(SUM(bytes), 0) FROM staged_bytes WHERE token_id = ?", (token,)
        )
    return int(rows[0][0])


def test_concurrent_reservations_on_two_replicas_stay_within_the_token_quota(
    replicas: Replicas,
) -> None:
    """Three 6-byte files of one token against its 10 bytes: one fits."""
    one, two = replicas()
    stores = [one, two, one, two, one, two]
    results = _race(
        [
            functools.partial(s.reserve, StagedFile(f"upload{n}", "a.zip", 7), 6, QUOTA, 0.0)
            for n, s in enumerate(stores)
        ]
    )
    assert sorted(r for r in results if isinstance(r, str)) == ["per_token"] * 5
    assert len([r for r in results if isinstance(r, int)]) == 1
    assert _held(two, 7) == 6


def test_concurrent_growth_on_two_replicas_stays_within_the_total_quota(
    replicas: Replicas,
) -> None:
    one, two = replicas()
    files = [StagedFile(f"upload{n}", "a.zip", n) for n in range(12)]
    stores = [one, two] * 6
    reserved = [s.reserve(f, 0, QUOTA, 0.0) for s, f in zip(stores, files, strict=True)]
    ids = [r for r in reserved if isinstance(r, int)]
    assert len(ids) == len(files)
    results = _race(
        [
            functools.partial(s.resize, r, f, 3, QUOTA, 1.0)
            for s, f, r in zip(stores, files, ids, strict=True)
        ]
    )
    assert results.count(None) == 8  # 8 x 3 bytes of 25
    assert results.count("total") == 4
    assert _held(one) == 24


def test_a_file_counts_its_real_size_until_its_upload_goes(replicas: Replicas) -> None:
    one, two = replicas()
    first = StagedFile("upload", "a.zip", 1)
    reservation = one.reserve(first, 8, QUOTA, 0.0)
    assert isinstance(reservation, int)
    assert two.reserve(StagedFile("other", "b.zip", 1), 4, QUOTA, 0.0) == "per_token"
    one.settle(reservation, first, 5, 1.0)
    assert isinstance(two.reserve(StagedFile("other", "b.zip", 1), 4, QUOTA, 1.0), int)
    # A PUT of the same name again replaces the stored file once it is stored.
    again = two.reserve(first, 1, QUOTA, 2.0)
    assert isinstance(again, int) and _held(one, 1) == 10
    two.settle(again, first, 1, 3.0)
    assert _held(one, 1) == 5
    one.forget_upload("upload")
    assert _held(one, 1) == 4


def test_a_failed_file_releases_its_reservation(replicas: Replicas) -> None:
    one, two = replicas()
    reservation = one.reserve(StagedFile("upload", "a.zip", 1), 10, QUOTA, 0.0)
    assert isinstance(reservation, int)
    two.release(reservation)
    two.release(reservation)  # idempotent
    assert _held(one) == 0


def test_the_cleaner_forgets_gone_uploads_and_dead_receivers(replicas: Replicas) -> None:
    one, two = replicas()
    stored = StagedFile("gone", "a.zip", 1)
    reservation = one.reserve(stored, 2, QUOTA, 0.0)
    assert isinstance(reservation, int)
    one.settle(reservation, stored, 2, 0.0)
    one.reserve(StagedFile("dead", "a.zip", 1), 3, QUOTA, 0.0)  # its process died
    alive = one.reserve(StagedFile("live", "a.zip", 1), 4, QUOTA, 100.0)
    recent = one.reserve(StagedFile("new", "a.zip", 1), 1, QUOTA, 100.0)
    assert isinstance(alive, int) and isinstance(recent, int)
    # "new" is not listed yet, but it was written after the listing began.
    assert two.forget(["live", "dead"], before=50.0, idle_before=50.0) == 2
    assert _held(one) == 5
    # A reservation dropped as idle is written again when its file grows.
    assert two.forget(["live", "new"], before=150.0, idle_before=150.0) == 2
    assert _held(one) == 0
    assert two.resize(alive, StagedFile("live", "a.zip", 1), 6, QUOTA, 200.0) is None
    assert _held(one) == 6

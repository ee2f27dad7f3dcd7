"""The transparency log's storage on both engines: appends from two replicas
at once leave no gap, tiles hold the RFC 6962 hashes, and the proofs built
from tiles are the ones the RFC defines (checked with spec_check.py)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitreg.attestations.store_sql import AttestationStore
from gitreg.attestations.tlog import TreeReader, verify_consistency, verify_inclusion
from gitreg.storage.index import Index, SQLiteIndex, open_index
from tests.attestations import spec_check


@pytest.fixture(params=["sqlite", "postgresql"])
def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[AttestationStore]]:
    opened: list[Index] = []
    for _ in range(2):
        if request.param == "sqlite":
            index: Index = SQLiteIndex(tmp_path / "index.sqlite3")
        else:
            url = request.getfixturevalue("postgres_database").url
            index = open_index(url, tmp_path / "unused.sqlite3")
        opened.append(index)
    yield [AttestationStore(i) for i in opened]
    for index in opened:
        index.close()


def _reader(store: AttestationStore, size: int) -> TreeReader:
    return TreeReader(size, lambda level, n, width: store.hashes(level, n * 256, width))


def test_two_writers_append_without_gaps_and_tiles_prove_every_entry(
    replicas: list[AttestationStore],
) -> None:
    def append(store: AttestationStore, who: str) -> None:
        for n in range(150):
            store.append_now(f'{{"who":"{who}","n":{n}}}'.encode())

    threads = [
        threading.Thread(target=append, args=(s, w)) for s, w in zip(replicas, "ab", strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store = replicas[0]
    size = store.size()
    assert size == 300
    entries = store.entries(0, 256) + store.entries(256, 256)
    assert len(entries) == 300
    # A full level-0 tile, a partial one and the level-1 hash of the first 256 leaves.
    leaves = [hashlib.sha256(b"\x00" + e).digest() for e in entries]
    assert store.hashes(0, 0, 256) == b"".join(leaves[:256])
    assert store.hashes(0, 256, 256) == b"".join(leaves[256:])
    assert store.hashes(1, 0, 256) == spec_check.mth(entries[:256])
    root = spec_check.mth(entries)
    reader = _reader(store, size)
    assert reader.root() == root
    for index in (0, 1, 200, 255, 256, 299):
        proof = reader.inclusion_proof(index)
        assert spec_check.root_from_path(index, size, leaves[index], proof) == root
        assert verify_inclusion(index, size, leaves[index], proof, root)
    for old in (1, 2, 7, 256, 257, 299, 300):
        proof = reader.consistency_proof(old)
        assert spec_check.consistent(entries, old, proof)
        assert verify_consistency(old, size, spec_check.mth(entries[:old]), root, proof)


def test_a_rewritten_log_fails_the_consistency_check(replicas: list[AttestationStore]) -> None:
    store = replicas[0]
    for n in range(10):
        store.append_now(f'{{"n":{n}}}'.encode())
    old_root = _reader(store, 10).root()
    with store._write() as conn:  # the rewrite: truncate to 6, append others
        conn.execute("DELETE FROM tlog_entries WHERE idx >= 6")
        conn.execute("DELETE FROM tlog_hashes WHERE idx >= 6 AND level = 0")
    for n in range(8):
        store.append_now(f'{{"other":{n}}}'.encode())
    reader = _reader(store, store.size())
    proof = reader.consistency_proof(10)
    assert not verify_consistency(10, reader.size, old_root, reader.root(), proof)

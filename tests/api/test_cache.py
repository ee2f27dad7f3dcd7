"""The metadata cache: bounded, and bounded harder for "not found" answers."""

from __future__ import annotations

import asyncio

from gitreg import cache
from gitreg.cache import MISSING, MetadataCache


def test_not_found_entries_have_their_own_smaller_bound() -> None:
    store: MetadataCache[object] = MetadataCache(lambda: 0)

    async def fill() -> None:
        await store.get("real", lambda: b"kept")
        for n in range(cache.MAX_NOT_FOUND + 10):
            await store.get(("made-up", n), lambda: None)

    asyncio.run(fill())
    assert store.peek("real") == b"kept"
    assert store.peek(("made-up", 0)) is MISSING  # dropped when the bound was reached
    assert store.peek(("made-up", cache.MAX_NOT_FOUND + 9)) is None


def test_invalidate_empties_the_cache() -> None:
    store: MetadataCache[object] = MetadataCache(lambda: 0)
    asyncio.run(store.get("k", lambda: 1))
    store.invalidate()
    assert store.peek("k") is MISSING


def test_bytes_are_bounded_and_the_oldest_entries_go_first() -> None:
    """A cache filled with far more answers than its byte
    bound keeps at most that bound, drops the oldest entries, and keeps the
    newest; entries are weighed by their bodies, not counted."""
    body = b"x" * 4000
    bound = 50 * cache.entry_bytes(body)
    store: MetadataCache[object] = MetadataCache(lambda: 0, max_bytes=bound)

    async def fill() -> None:
        for n in range(1000):
            await store.get(("answer", n), lambda: body)
            assert store.size_bytes <= bound

    asyncio.run(fill())
    assert store.peek(("answer", 0)) is MISSING
    assert store.peek(("answer", 949)) is MISSING
    assert all(store.peek(("answer", n)) is body for n in range(950, 1000))
    small: MetadataCache[object] = MetadataCache(lambda: 0, max_bytes=bound)
    asyncio.run(small.get("small", lambda: 1))
    assert small.size_bytes == cache.ENTRY_BYTES  # a small value weighs one entry


def test_evicted_not_found_entries_free_their_bound() -> None:
    """Not-found entries dropped for size no longer count against MAX_NOT_FOUND."""
    store: MetadataCache[object] = MetadataCache(lambda: 0, max_bytes=10 * cache.ENTRY_BYTES)

    async def fill() -> None:
        for n in range(cache.MAX_NOT_FOUND - 1):
            await store.get(("made-up", n), lambda: None)
        await store.get("real", lambda: 1)

    asyncio.run(fill())
    assert store.peek("real") == 1
    assert store.size_bytes <= 10 * cache.ENTRY_BYTES


def test_an_answer_too_large_for_the_bound_evicts_nothing() -> None:
    """One huge answer is not kept: it would push every other entry out and,
    past the bound by itself, hold the cache over its memory budget."""
    bound = 20 * cache.ENTRY_BYTES
    store: MetadataCache[object] = MetadataCache(lambda: 0, max_bytes=bound)
    huge = b"x" * bound

    async def fill() -> object:
        await store.get("small", lambda: b"kept")
        return await store.get("huge", lambda: huge)

    assert asyncio.run(fill()) is huge  # still answered
    assert store.peek("small") == b"kept"
    assert store.peek("huge") is MISSING
    assert store.size_bytes <= bound


def test_a_snapshot_is_built_once_per_generation_whatever_its_size() -> None:
    """The browse list outgrows the byte bound at ~3,000 modules; as a snapshot
    it is built once, not on every request, kept apart from the bounded
    entries, and dropped on invalidation like them."""
    bound = 20 * cache.ENTRY_BYTES
    store: MetadataCache[object] = MetadataCache(lambda: 0, max_bytes=bound)
    builds: list[int] = []

    def build() -> object:
        builds.append(1)
        return list(range(10 * bound))  # far over the bound

    async def read() -> object:
        await store.get("small", lambda: b"kept")
        first = await store.snapshot(("listed",), build)
        assert await store.snapshot(("listed",), build) is first
        return first

    asyncio.run(read())
    assert len(builds) == 1
    assert store.peek("small") == b"kept"  # the snapshot pushed nothing out
    store.invalidate()
    asyncio.run(read())
    assert len(builds) == 2

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

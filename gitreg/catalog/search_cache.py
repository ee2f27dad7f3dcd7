"""Search answers, cached apart from the metadata cache (issue 13).

Each distinct query is one entry: kept in the 50,000-entry metadata cache,
a stream of made-up queries would fill it and make it start over, costing
every cached `versions` and `download` answer a rebuild. Here they live in a
small LRU of their own, and an entry is valid only for the metadata cache's
generation it was built in, so a publish (which invalidates that cache)
makes every cached search stale at once. Used from the event loop only.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool

from gitreg.cache import MetadataCache

MAX_SEARCHES = 512
Hits = list[tuple[int, str]]


class SearchCache:
    def __init__(self, cache: MetadataCache[object], size: int = MAX_SEARCHES) -> None:
        self._cache = cache  # only its generation: publishes invalidate it
        self._size = size
        self._entries: OrderedDict[str, tuple[int, Hits]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, query: str, build: Callable[[], Hits]) -> Hits:
        found = self._entries.get(query)
        if found is not None and found[0] == self._cache.generation:
            self._entries.move_to_end(query)
            return found[1]
        generation = self._cache.generation
        hits = await run_in_threadpool(build)
        if generation == self._cache.generation:  # nothing published meanwhile
            self._entries[query] = (generation, hits)
            self._entries.move_to_end(query)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return hits

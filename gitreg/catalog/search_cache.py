"""Search answers, cached apart from the metadata cache.

Each distinct query is one entry: kept in the 50,000-entry metadata cache,
a stream of made-up queries would fill it and make it start over, costing
every cached `versions` and `download` answer a rebuild. Here they live in a
small LRU of their own, and an entry is valid only for the metadata cache's
generation it was built in, so a publish (which invalidates that cache)
makes every cached search stale at once. Used from the event loop only.

An entry is one query as seen by one class of readers: the namespaces hidden
from them are part of the key, because storage leaves those out before it
picks the best 1,000 (`hidden_namespaces`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from anyio.to_thread import run_sync

from gitreg.cache import MetadataCache
from gitreg.catalog.records import Listed

MAX_SEARCHES = 512
SEARCH_CANDIDATES = 1_000  # best visible matches considered before paging (API and UI)
Hits = list[tuple[int, str]]


class SearchCache:
    def __init__(self, cache: MetadataCache[object], size: int = MAX_SEARCHES) -> None:
        self._cache = cache  # only its generation: publishes invalidate it
        self._size = size
        self._entries: OrderedDict[Hashable, tuple[int, Hits]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, query: Hashable, build: Callable[[], Hits]) -> Hits:
        found = self._entries.get(query)
        if found is not None and found[0] == self._cache.generation:
            self._entries.move_to_end(query)
            return found[1]
        generation = self._cache.generation
        hits = await run_sync(build)
        if generation == self._cache.generation:  # nothing published meanwhile
            self._entries[query] = (generation, hits)
            self._entries.move_to_end(query)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return hits


def hidden_namespaces(namespaces: Iterable[str], visible: Callable[[str], bool]) -> frozenset[str]:
    """The namespaces (lowercase) among `namespaces` that a reader may not see:
    what `CatalogIndex.search` leaves out. Private modules crowding the best
    1,000 matches would otherwise push every public match off an anonymous
    reader's results (and a filter after the limit shows that they exist)."""
    return frozenset(ns.lower() for ns in set(namespaces) if not visible(ns))


@dataclass(frozen=True)
class Listing:
    """Every listed module (the browse list, `all_listed`) with what each
    search needs of it, made once per publish with the list rather than on
    the event loop per search (docs/performance.md, "Documentation and
    search")."""

    modules: list[Listed]
    by_id: dict[int, Listed]
    namespaces: frozenset[str]

    @classmethod
    def of(cls, modules: list[Listed]) -> Listing:
        by_id = {m.module_id: m for m in modules}
        return cls(modules, by_id, frozenset(m.namespace for m in modules))

    def hidden(self, visible: Callable[[str], bool]) -> frozenset[str]:
        return hidden_namespaces(self.namespaces, visible)

    def found(self, hits: Hits, visible: Callable[[str], bool]) -> list[Listed]:
        """The listed modules of search hits the reader may see, in order."""
        return [self.by_id[i] for i, ns in hits if i in self.by_id and visible(ns)]

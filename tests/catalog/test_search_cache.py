"""Search answers live in a small LRU of their own, never in the metadata
cache, and a publish (a metadata-cache invalidation) makes them stale."""

from __future__ import annotations

import asyncio

from gitreg.cache import MetadataCache
from gitreg.catalog.records import Listed
from gitreg.catalog.search_cache import Listing, SearchCache


def test_bounded_lru_that_a_publish_invalidates() -> None:
    metadata: MetadataCache[object] = MetadataCache(lambda: 0)
    searches = SearchCache(metadata, size=3)
    built: list[str] = []

    def ask(query: str) -> list[tuple[int, str]]:
        def build() -> list[tuple[int, str]]:
            built.append(query)
            return [(len(built), "acme")]

        return asyncio.run(searches.get(query, build))

    for query in ("a", "b", "c", "a", "d"):  # "d" pushes out the least recent, "b"
        ask(query)
    assert built == ["a", "b", "c", "d"] and len(searches) == 3
    ask("a")
    ask("b")
    assert built == ["a", "b", "c", "d", "b"]
    first = ask("a")
    metadata.invalidate()  # a publish
    assert ask("a") != first and built[-1] == "a"


def test_many_distinct_searches_leave_the_metadata_cache_alone() -> None:
    metadata: MetadataCache[object] = MetadataCache(lambda: 0)
    asyncio.run(metadata.get(("module-versions", "acme", "vpc", "aws"), lambda: b"{}"))
    searches = SearchCache(metadata, size=10)
    for number in range(100):
        asyncio.run(searches.get(f"q{number}", lambda: []))
    assert len(searches) == 10
    assert metadata.peek(("module-versions", "acme", "vpc", "aws")) == b"{}"


def test_a_listing_hides_and_orders_hits_for_each_reader() -> None:
    modules = [Listed(i, ns, {"id": i}) for i, ns in ((1, "Acme"), (2, "secret"), (3, "acme"))]
    listing = Listing.of(modules)

    def public(namespace: str) -> bool:
        return namespace.lower() != "secret"

    assert listing.hidden(public) == frozenset({"secret"})
    assert listing.hidden(lambda ns: True) == frozenset()
    hits = [(3, "acme"), (2, "secret"), (9, "acme"), (1, "Acme")]  # 9: gone since
    assert [m.module_id for m in listing.found(hits, public)] == [3, 1]

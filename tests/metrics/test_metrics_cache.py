"""Cache entries and evictions (gitreg/cache.py) as /metrics reports them:
a real cache filled past its bounds, read back through the exposition format."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import generate_latest

from gitreg import cache
from gitreg.metrics import service as metrics
from tests.metrics.scrape import Samples, parse, value


def _samples() -> Samples:
    return parse(generate_latest(metrics.registry()).decode())


def test_a_full_cache_counts_its_evictions(monkeypatch: pytest.MonkeyPatch) -> None:
    metrics.enable(per_module=False)  # as create_app does
    monkeypatch.setattr(cache, "MAX_NOT_FOUND", 3)
    # Room for eight "x" answers (the bound is in bytes).
    room = 8 * cache.entry_bytes("x")
    metadata: cache.MetadataCache[object] = cache.MetadataCache(lambda: 0, max_bytes=room)
    before = _samples()

    async def fill() -> None:
        for n in range(4):  # the fourth "not found" drops the other three
            await metadata.get(("missing", n), lambda: None)
        middle = _samples()
        dropped = value(middle, "gitreg_cache_evictions_total", reason="not_found_full")
        assert dropped - value(before, "gitreg_cache_evictions_total", reason="not_found_full") == 3
        assert value(middle, "gitreg_cache_entries") == 1
        for n in range(8):  # 1 + 7 fill it; the eighth pushes the oldest out
            await metadata.get(("found", n), lambda: "x")

    asyncio.run(fill())
    after = _samples()
    full = value(after, "gitreg_cache_evictions_total", reason="full")
    assert full - value(before, "gitreg_cache_evictions_total", reason="full") == 1
    assert value(after, "gitreg_cache_entries") == 8
    metadata.invalidate()
    invalidated = value(_samples(), "gitreg_cache_evictions_total", reason="invalidated")
    assert invalidated - value(after, "gitreg_cache_evictions_total", reason="invalidated") == 8
    assert value(_samples(), "gitreg_cache_entries") == 0

"""Cache misses are built on at most `cache_build_threads` worker threads at
once: the others wait on the event loop, so a burst of
cold answers does not start a thread each that then stays in the worker's RSS."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from gitreg.cache import MetadataCache
from gitreg.errors import ConfigError
from gitreg.settings import load_settings


class Builds:
    """Counts the builds running at once, and the threads they ran on."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    def build(self, value: str) -> str:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.threads.add(threading.get_ident())
        time.sleep(0.02)  # a query that takes a while
        with self._lock:
            self.running -= 1
        return value


async def _cold_burst(cache: MetadataCache[str], builds: Builds, n: int) -> list[str]:
    asked = [cache.get(f"k{i}", lambda i=i: builds.build(f"v{i}")) for i in range(n)]  # type: ignore[misc]
    return await asyncio.gather(*asked)


def test_a_burst_of_misses_builds_on_at_most_the_set_threads() -> None:
    cache: MetadataCache[str] = MetadataCache(lambda: 0, build_threads=3)
    builds = Builds()
    answers = asyncio.run(_cold_burst(cache, builds, 12))
    assert answers == [f"v{i}" for i in range(12)]  # every request answered, in order
    assert builds.most == 3
    assert len(builds.threads) <= 3
    assert cache.peek("k11") == "v11"


def test_the_limit_holds_when_the_app_runs_on_a_new_event_loop() -> None:
    """Tests and `--workers` start an app again on a new loop."""
    cache: MetadataCache[str] = MetadataCache(lambda: 0, build_threads=2)
    for _ in range(2):
        builds = Builds()
        cache.invalidate()
        assert asyncio.run(_cold_burst(cache, builds, 6)) == [f"v{i}" for i in range(6)]
        assert builds.most == 2


def test_the_setting_is_read_and_checked(tmp_path: Path) -> None:
    found = load_settings({"data_dir": tmp_path}, environ={"GITREG_CACHE_BUILD_THREADS": "3"})
    assert found.cache_build_threads == 3
    with pytest.raises(ConfigError, match="cache_build_threads"):
        load_settings({"data_dir": tmp_path}, environ={"GITREG_CACHE_BUILD_THREADS": "0"})

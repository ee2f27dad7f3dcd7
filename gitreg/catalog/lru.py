"""The catalog's caches: least recently used out first, bounded by a size per value.

Extraction keeps what does not change from tag to tag (blob texts, tree listings,
parsed `.tf` files, whole documents) so that it adds little to publishing, and
bounds each cache so a serving worker's memory does not grow with the
repositories it published. Publishing runs on several job threads, hence the
lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sized
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _length(value: object) -> int:
    return len(value) if isinstance(value, Sized) else 1


class SizedLru(Generic[K, V]):
    """At most `max_size` in total of the sizes given to `put`. A value over
    `max_size // largest_share` is not kept: it would push out most others,
    and is cheaper to make again than to let evict them."""

    def __init__(
        self, max_size: int, largest_share: int, size_of: Callable[[V], int] = _length
    ) -> None:
        self._max = max_size
        self._largest = max_size // largest_share
        self._size_of = size_of
        self._size = 0
        self._values: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._values.get(key)
            if found is None:
                return None
            self._values.move_to_end(key)
            return found[0]

    def put(self, key: K, value: V, size: int | None = None) -> None:
        """Keep `value` (sized by `size`, or by `size_of`) unless it is too large
        or `key` is already kept; drop the least recently used over the bound."""
        size = self._size_of(value) if size is None else size
        if size > self._largest:
            return
        with self._lock:
            if key in self._values:
                return
            self._values[key] = (value, size)
            self._size += size
            while self._size > self._max:
                _, (_, dropped) = self._values.popitem(last=False)
                self._size -= dropped

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._size = 0

    def __contains__(self, key: K) -> bool:
        return key in self._values

    @property
    def size(self) -> int:
        """The sizes of what is kept, added up."""
        return self._size

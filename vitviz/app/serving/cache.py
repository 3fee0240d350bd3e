"""A small, bounded, thread-safe cache keyed by a model object: cachetools' LRU cache under a lock.

Entries are keyed by a weak reference, so a visitor's model that is gone (its
session ended, a new run replaced it) takes its entry with it; at most `size`
entries are kept, the least recently used going first.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from cachetools import LRUCache

from vitviz.models.loaded import LoadedViT


class ModelCache:
    def __init__(self, size: int | Callable[[], int] = 8):
        self._size = size  # a number, or a function giving it (the operator's bound, read when it is needed)
        self._items: LRUCache = LRUCache(self.size)
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        return max(1, int(self._size() if callable(self._size) else self._size))

    def _drop(self, ref: weakref.ref) -> None:
        with self._lock:
            self._items.pop(ref, None)

    def get(self, model: LoadedViT, make: Callable[[], object]) -> object:
        """The cached value for `model`, or `make()`'s, stored (computed outside the lock)."""
        key = weakref.ref(model, self._drop)
        with self._lock:
            if key in self._items:
                return self._items[key]  # and now the most recently used
        value = make()
        with self._lock:
            if self._items.maxsize != self.size:  # the bound was changed: start again under the new one
                self._items = LRUCache(self.size)
            self._items[key] = value
        return value

    def __len__(self) -> int:
        return len(self._items)

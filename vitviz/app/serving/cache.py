"""A small, bounded, thread-safe cache keyed by a model object.

Entries are keyed by a weak reference, so a visitor's model that is gone (its
session ended, a new run replaced it) takes its entry with it; at most `size`
entries are kept, the least recently used going first.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable

from vitviz.models.loaded import LoadedViT


class ModelCache:
    def __init__(self, size=8):
        self._size = size  # a number, or a function giving it (a bound read when it is needed)
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        return int(self._size() if callable(self._size) else self._size)

    def _key(self, model: LoadedViT):
        return weakref.ref(model, self._drop)

    def _drop(self, ref):
        with self._lock:
            self._items.pop(ref, None)

    def get(self, model: LoadedViT, make: Callable[[], object]) -> object:
        """The cached value for `model`, or `make()`'s, stored (computed outside the lock)."""
        key = self._key(model)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = make()
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def __len__(self):
        return len(self._items)

"""Results computed once and handed to every thread that asks for the same, bounded by the memory they hold.

`SharedResults` keeps a result by its owner and a key: the owner (a model record, a result pictures are drawn
from) is held weakly, so an owner that is gone takes its results with it and a new one is never mistaken for an
old one of the same id; the results are measured by the caller's `size` (again whenever one is added: a result
may grow) and the least recently used go first past the bound; several callers asking at the same moment wait
for one computation (and compute their own if it fails). vitviz.app.serving.shared keeps the app's results in
one; vitviz.pictures.drawn the pictures drawn from them in another.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import numpy as np
import torch
from PIL import Image

T = TypeVar("T")
WAIT_S = 120.0  # a caller waits this long at most for another's computation of the same result, then computes
NO_OWNER = object()  # the owner of results that depend on no model (an image decoded for an input geometry)


class SharedResults:
    """Results by (owner, key), for every thread of the process; `bound()` gives the megabytes they may hold."""

    def __init__(self, bound: Callable[[], float]):
        self.bound = bound
        self._items: OrderedDict[tuple, tuple[Any, Callable[[Any], int]]] = OrderedDict()  # (id, *key) -> kept
        self._owners: dict[int, weakref.ref] = {}  # id -> the owner, held weakly: one reference for all its results
        self._flights: dict[tuple, Future] = {}
        self._lock = threading.RLock()  # re-entered when an owner goes while its results are being let go

    def get(self, owner: object, key: tuple, compute: Callable[[], T], size: Callable[[T], int]) -> T:
        """The result for (`owner`, `key`): the kept one, another caller's computation of it, or `compute()`,
        kept while the results fit the bound (each measured by its `size`, again whenever one is added: a result
        may grow, as an explanation does with the maps made from it)."""
        k = (id(owner), *key)
        with self._lock:
            item = self._items.get(k)
            if item is not None and self._holds(owner):
                self._items.move_to_end(k)
                return item[0]
            flight = self._flights.get(k)
            if flight is None:
                mine = self._flights[k] = Future()
        if flight is not None:
            try:
                return flight.result(timeout=WAIT_S)
            except Exception:  # noqa: BLE001 - theirs failed or took too long: this caller computes its own
                return compute()
        try:
            value = compute()
        except BaseException as e:
            with self._lock:
                self._flights.pop(k, None)
            mine.set_exception(e)
            raise
        self._keep(k, owner, value, size)
        mine.set_result(value)
        return value

    def _holds(self, owner: object) -> bool:
        """Whether the results kept under `owner`'s id are `owner`'s (not an owner gone whose id it took)."""
        if owner is NO_OWNER:
            return True
        ref = self._owners.get(id(owner))
        return ref is not None and ref() is owner

    def _keep(self, k: tuple, owner: object, value: object, size: Callable[[Any], int]) -> None:
        bound = self.bound() * 2**20
        with self._lock:
            self._flights.pop(k, None)
            if not self._holds(owner):
                self._forget_id(k[0])
                self._owners[k[0]] = weakref.ref(owner, lambda ref, i=k[0]: self._forget(i, ref))
            self._items.pop(k, None)
            self._items[k] = (value, size)
            sizes = {key: measure(v) for key, (v, measure) in self._items.items()}
            total = sum(sizes.values())
            while total > bound and self._items:
                oldest = next(iter(self._items))
                del self._items[oldest]
                total -= sizes[oldest]

    def _forget(self, owner_id: int, ref: weakref.ref) -> None:
        """An owner went: its results go too (once, whatever their number)."""
        with self._lock:
            if self._owners.get(owner_id) is ref:
                self._forget_id(owner_id)

    def _forget_id(self, owner_id: int) -> None:
        self._owners.pop(owner_id, None)
        for k in [k for k in self._items if k[0] == owner_id]:
            del self._items[k]

    def nbytes(self) -> int:
        """The memory the kept results hold now."""
        with self._lock:
            return sum(measure(v) for v, measure in self._items.values())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def held_by(self, owner: object) -> int:
        """How many results of `owner` are kept."""
        with self._lock:
            return sum(1 for k in self._items if k[0] == id(owner)) if self._holds(owner) else 0


def nbytes_of(value: object, depth: int = 3) -> int:
    """The memory the tensors and arrays of `value` hold (its fields, dicts, lists and tuples, `depth` deep)."""
    if isinstance(value, torch.Tensor):
        return value.element_size() * value.nelement()
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, Image.Image):
        return value.width * value.height * len(value.getbands())
    if depth == 0:
        return 0
    if isinstance(value, dict):
        items = list(value.values())  # one step under the GIL: another thread may be adding to it
    elif isinstance(value, (list, tuple)):
        items = list(value)
    elif hasattr(value, "__dict__"):
        items = list(vars(value).values())
    else:
        return 0
    return sum(nbytes_of(v, depth - 1) for v in items)

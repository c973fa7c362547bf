"""Values a process keeps under keys that name the state of the rows they were computed from: the same key, the
same value, computed once. A key holds the ids it was read for (which only their organization's session can read
back) and sums that every write to those rows changes, so a kept value is never shown for another state."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")
_every: weakref.WeakSet[Kept] = weakref.WeakSet()


class Kept(Generic[V]):
    """Values weighing at most `size` together (each weighs `weigh(value)`, 1 unless told), the least recently asked
    for dropped first."""

    def __init__(self, size: int, weigh: Callable[[V], int] | None = None) -> None:
        self.size = size
        self._weigh = weigh or (lambda value: 1)
        self._values: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()
        _every.add(self)

    def get(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The value kept under `key`, else `compute()` kept under it."""
        found = self.find(key)
        if found is not None:
            return found
        value = compute()
        self.keep(key, value)
        return value

    def find(self, key: Hashable) -> V | None:
        """The value kept under `key` (None when none is)."""
        with self._lock:
            if key not in self._values:
                return None
            self._values.move_to_end(key)
            return self._values[key][0]

    def keep(self, key: Hashable, value: V) -> None:
        """Keep `value` under `key`, dropping the least recently asked for values past the size."""
        weight = self._weigh(value)
        with self._lock:
            if key in self._values:
                self._weight -= self._values.pop(key)[1]
            self._values[key] = (value, weight)
            self._weight += weight
            while self._weight > self.size and len(self._values) > 1:
                self._weight -= self._values.popitem(last=False)[1][1]

    def clear(self) -> None:
        """Drop every value."""
        with self._lock:
            self._values.clear()
            self._weight = 0


def forget_all() -> None:
    """Drop the values of every Kept of the process, so the next read of each state computes it (bench.datasets
    measures a process's first read of each page so)."""
    for kept in list(_every):
        kept.clear()
